import { root } from './outsideInstall.js';
import { readmes } from './readmeBlocks.js';
import { snippetSuite } from './snippetSuite.js';

/**
 * Every ```ts block of the READMEs runs as written, and every ```tsx block type-checks, in
 * a throwaway project per README outside the workspace (see snippetSuite.ts). A block that
 * opens PGlite runs a second time on the Postgres server at `DATABASE_URL` through
 * postgres-js, on a scratch database of its own (postgresPass.ts), as the docs' do.
 */
snippetSuite({
  what: 'README',
  files: readmes(root),
  // One quick start per README; the React components moved to the docs pages.
  minSnippets: 5,
  minReactSnippets: 0,
  postgresPass: true,
});
