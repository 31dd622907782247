import { root } from './outsideInstall.js';
import { docsPages } from './readmeBlocks.js';
import { snippetSuite } from './snippetSuite.js';

/**
 * Every ```ts block of the documentation site's pages (docs/, not the generated API
 * reference) runs as written, and every ```tsx block type-checks, in a throwaway project per
 * page outside the workspace, installed from that page's ```sh `npm install` lines (see
 * snippetSuite.ts). A snippet that opens PGlite runs a second time on the Postgres server at
 * `DATABASE_URL` through postgres-js, on a scratch database of its own (postgresPass.ts).
 */
snippetSuite({
  what: 'docs page',
  files: docsPages(root),
  minSnippets: 40,
  minReactSnippets: 2,
  postgresPass: true,
});
