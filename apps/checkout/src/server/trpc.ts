import { isIdempotencyError } from '@idem/core';
import { idempotencyContext, withIdempotencyErrorData } from '@idem/server';
import { initTRPC, type TRPCError } from '@trpc/server';
import type { FetchCreateContextFnOptions } from '@trpc/server/adapters/fetch';
import superjson from 'superjson';
import { ZodError } from 'zod';
import type { CrashSwitch } from './crashAfterCharge';
import { getRuntime } from './runtime';

/** The header that names the shopper's browser session (the demo has no accounts). */
export const SESSION_HEADER = 'x-demo-session';
const SESSION_ID = /^[A-Za-z0-9-]{8,64}$/;

export async function createContext(opts: FetchCreateContextFnOptions, crash: CrashSwitch) {
  const session = opts.req.headers.get(SESSION_HEADER);
  return {
    // What idem's middleware reads: the request's keys, and where replay headers go.
    ...idempotencyContext(opts),
    sessionId: session && SESSION_ID.test(session) ? session : 'anonymous',
    crash,
    runtime: await getRuntime(),
  };
}

export type Context = Awaited<ReturnType<typeof createContext>>;

const t = initTRPC.context<Context>().create({
  transformer: superjson,
  errorFormatter({ shape, error }) {
    // A card decline keeps its code on replay: the stored error's cause keeps its fields.
    const declineCode = (error.cause as { declineCode?: unknown } | undefined)?.declineCode;
    return withIdempotencyErrorData(
      {
        ...shape,
        message: validationMessage(error.cause) ?? (unexpected(error) ? UNEXPECTED : shape.message),
        data: {
          ...shape.data,
          declineCode: typeof declineCode === 'string' ? declineCode : null,
        },
      },
      error,
    );
  },
});

export const router = t.router;
export const publicProcedure = t.procedure;

/** What the client reads of a failure nobody planned: the server's log has its words. */
const UNEXPECTED = 'The server failed on this request; its log says why. Try again.';

/**
 * A 500 from a thrown error that is neither the app's own answer (a TRPCError it threw) nor
 * idem's (its messages name no SQL): a driver's error, say, whose message quotes its query
 * and parameters, which stay in the server's log.
 */
function unexpected(error: TRPCError): boolean {
  return (
    error.code === 'INTERNAL_SERVER_ERROR' &&
    error.cause !== undefined &&
    !isIdempotencyError(error.cause)
  );
}

/**
 * An input the schema refused, in the words of the schema's own messages ("Enter an email
 * address for the receipt."), where tRPC's message is the issues as JSON.
 */
function validationMessage(cause: unknown): string | undefined {
  if (!(cause instanceof ZodError)) return undefined;
  const messages = [...new Set(cause.issues.map((issue) => issue.message))];
  return messages.map((message) => (/[.!?]$/.test(message) ? message : `${message}.`)).join(' ');
}
