import { resumeAbandonedPayments } from './resumeAbandonedPayments';
import { getRuntime } from './runtime';

/**
 * Starts the runtime and the server's own payment attempts (for payments nobody came back
 * for), and prints where the demo is; a server that cannot start exits.
 */
export async function startServer(): Promise<void> {
  try {
    const runtime = await getRuntime();
    runtime.stopsWith(resumeAbandonedPayments(runtime));
    // `pnpm start` passes HOST to `next start --hostname`; without it Next.js listens on
    // every interface, and localhost reaches it.
    const host = process.env.HOST || 'localhost';
    const url = `http://${host.includes(':') ? `[${host}]` : host}:${process.env.PORT ?? '3000'}`;
    console.log(`\n  idem checkout demo: ${url}\n  ${runtime.describe()}\n`);
  } catch (error) {
    console.error(`\n  The idem checkout demo could not start:\n  ${(error as Error).message}\n`);
    process.exit(1);
  }
}
