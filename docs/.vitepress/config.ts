import { existsSync, readFileSync } from 'node:fs';
import { type DefaultTheme, defineConfig } from 'vitepress';
import { siteUrl } from './siteUrl.mjs';

export { siteUrl };

/** The API reference's sidebar, written by scripts/apiDocs.mjs with the pages it generates. */
function apiSidebar(): DefaultTheme.SidebarItem[] {
  const file = new URL('../api/typedoc-sidebar.json', import.meta.url);
  if (!existsSync(file)) return [];
  return JSON.parse(readFileSync(file, 'utf8')) as DefaultTheme.SidebarItem[];
}

/** The guides, in reading order. */
const guides: DefaultTheme.SidebarItem[] = [
  {
    text: 'Introduction',
    items: [
      { text: 'Getting started', link: '/guide/getting-started' },
      { text: 'Keys', link: '/guide/keys' },
    ],
  },
  {
    text: 'Server',
    items: [
      { text: 'tRPC middleware', link: '/guide/trpc' },
      { text: 'Route handlers', link: '/guide/route-handlers' },
      { text: 'Server actions', link: '/guide/server-actions' },
      { text: 'Transaction and lease mode', link: '/guide/modes' },
      { text: 'Postgres', link: '/guide/postgres' },
      { text: 'Outbox', link: '/guide/outbox' },
    ],
  },
  {
    text: 'Client and engine',
    items: [
      { text: 'Client links', link: '/guide/client' },
      { text: 'The core engine', link: '/guide/core' },
      { text: 'Redis', link: '/guide/redis' },
    ],
  },
  {
    text: 'Running it',
    items: [
      { text: 'Testing', link: '/guide/testing' },
      { text: 'Operations', link: '/guide/operations' },
      { text: 'Failure modes', link: '/guide/failure-modes' },
      { text: 'Error codes', link: '/guide/errors' },
    ],
  },
];

export default defineConfig({
  title: 'idem',
  description: 'Idempotency keys for tRPC, Fetch and Next.js apps on Postgres.',
  base: new URL(siteUrl).pathname,
  cleanUrls: true,
  // The API reference is generated into api/ by scripts/apiDocs.mjs before each build.
  srcExclude: ['scripts/**'],
  sitemap: { hostname: siteUrl },
  // The local search index is one chunk of about 1 MB, loaded when the search opens.
  vite: { build: { chunkSizeWarningLimit: 2000 } },
  themeConfig: {
    nav: [
      { text: 'Guide', link: '/guide/getting-started' },
      { text: 'API', link: '/api/' },
    ],
    sidebar: [
      ...guides,
      { text: 'API reference', link: '/api/', collapsed: true, items: apiSidebar() },
    ],
    outline: { level: [2, 3] },
    search: { provider: 'local' },
  },
});
