import path from 'node:path';
import type { NextConfig } from 'next';

/** The monorepo root: the @idem/* packages are symlinked from there. */
const workspaceRoot = path.resolve(import.meta.dirname, '../..');

const nextConfig: NextConfig = {
  reactStrictMode: true,
  poweredByHeader: false,
  devIndicators: false,
  // Loaded by Node at run time rather than bundled: PGlite reads its WebAssembly and data
  // files next to its own module, and the database drivers open sockets.
  serverExternalPackages: [
    '@electric-sql/pglite',
    'postgres',
    'drizzle-orm',
    '@idem/server',
    '@nats-io/transport-node',
    '@nats-io/jetstream',
    '@nats-io/nats-core',
  ],
  turbopack: { root: workspaceRoot },
  outputFileTracingRoot: workspaceRoot,
};

export default nextConfig;
