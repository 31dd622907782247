import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { crashSwitch } from '@/server/crashAfterCharge';
import { appRouter } from '@/server/routers/appRouter';
import { createContext } from '@/server/trpc';

export const dynamic = 'force-dynamic';

async function handler(req: Request): Promise<Response> {
  const crash = crashSwitch();
  const response = fetchRequestHandler({
    endpoint: '/api/trpc',
    req,
    router: appRouter,
    createContext: (opts) => createContext(opts, crash),
    onError({ error, path }) {
      if (error.code === 'INTERNAL_SERVER_ERROR') console.error(`tRPC ${path}:`, error);
    },
  });
  // "Crash after charge": the attempt is dead and its reply never comes. The client sees
  // the connection die, as it would if the process had been killed.
  const answered = await Promise.race([response, crash.crashed.then(() => undefined)]);
  return answered ?? severedConnection();
}

/**
 * A response that dies mid-body, as when the server process is killed while answering.
 * The first bytes matter: a connection that closes before any response byte makes
 * Chromium resend the POST by itself (it takes that for a stale keep-alive socket).
 */
function severedConnection(): Response {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode('{"result":'));
      setTimeout(
        () => controller.error(new Error('simulated crash: the server process died')),
        300,
      );
    },
  });
  return new Response(body, { headers: { 'content-type': 'application/json' } });
}

export { handler as GET, handler as POST };
