/**
 * Runs once when the Next.js server starts (Node.js runtime only): opens the database,
 * applies migrations and starts the outbox relay before the first request.
 */
export async function register(): Promise<void> {
  if (process.env.NEXT_RUNTIME !== 'nodejs') return;
  if (process.env.NEXT_PHASE === 'phase-production-build') return;
  const { startServer } = await import('./server/startServer');
  await startServer();
}
