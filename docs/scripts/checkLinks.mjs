// The link check of the built site (docs/.vitepress/dist), run after `vitepress build`, which
// checks only that a markdown link names a page. This checks what it does not:
//
// - every link of every built page (the guides, the API reference, the sidebar and the nav)
//   that points into the site names a page that was built and, with a `#anchor`, an id on that
//   page (a heading's, as VitePress slugs it);
// - every error code @idem/server answers with links to an anchor of the built errors page
//   (`errorTypeUrl(DEFAULT_ERROR_DOCS_URL, code)` for each `RefusalCode`);
// - every link from the root and package READMEs to `${siteUrl}…` names a built page and anchor.
//
//   node docs/scripts/checkLinks.mjs     (after the build; exits 1 listing what is broken)
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import { siteUrl } from '../.vitepress/siteUrl.mjs';

const docsDir = fileURLToPath(new URL('..', import.meta.url));
const root = join(docsDir, '..');
export const distDir = join(docsDir, '.vitepress', 'dist');

const ENTITIES = { amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", apos: "'" };
/** An attribute's value as the browser reads it (the entities VitePress writes, decoded). */
const decodeEntities = (value) =>
  value.replace(/&(amp|lt|gt|quot|#39|apos);/g, (_, name) => ENTITIES[name]);

/**
 * Every built HTML page under `dir`: by its path relative to `dir` (`guide/keys.html`), the
 * ids an anchor can name and the `href` of each link.
 * @returns {Map<string, { ids: Set<string>, hrefs: string[] }>}
 */
export function readSite(dir) {
  if (!existsSync(dir)) {
    throw new Error(`${dir} does not exist: build the site first (pnpm docs:build)`);
  }
  const pages = new Map();
  const walk = (folder) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.html')) {
        const html = readFileSync(path, 'utf8');
        pages.set(relative(dir, path).split(sep).join('/'), {
          ids: new Set([...html.matchAll(/\sid="([^"]*)"/g)].map(([, id]) => decodeEntities(id))),
          hrefs: [...html.matchAll(/<a\s[^>]*?href="([^"]*)"/g)].map(([, href]) =>
            decodeEntities(href),
          ),
        });
      }
    }
  };
  walk(dir);
  return pages;
}

/** The address a built page is served at (`guide/keys.html` → `${site}guide/keys`). */
export function pageUrl(page, site = siteUrl) {
  return `${site}${page.replace(/(^|\/)index\.html$/, '$1').replace(/\.html$/, '')}`;
}

/**
 * What is wrong with `url` (absolute), or `undefined` when it is fine: outside the site (an
 * external link) is fine; inside it, it must name a built page or file and, with a `#anchor`,
 * an id on that page.
 */
export function urlProblem(url, pages, dir = distDir, site = siteUrl) {
  const target = new URL(url);
  const base = new URL(site);
  if (target.origin !== base.origin) return undefined;
  if (!target.pathname.startsWith(base.pathname)) {
    return `is outside the site, whose pages are under ${base.pathname}`;
  }
  const path = decodeURIComponent(target.pathname.slice(base.pathname.length));
  const candidates =
    path === '' || path.endsWith('/')
      ? [`${path}index.html`]
      : path.endsWith('.html')
        ? [path]
        : [`${path}.html`, `${path}/index.html`];
  const page = candidates.find((candidate) => pages.has(candidate));
  if (!page) {
    // A file the site serves as it is (an image, the sitemap).
    const file = join(dir, path);
    if (path !== '' && existsSync(file) && statSync(file).isFile() && !target.hash)
      return undefined;
    return `names no built page (looked for ${candidates.join(', ')})`;
  }
  const anchor = decodeURIComponent(target.hash.slice(1));
  if (anchor && !pages.get(page)?.ids.has(anchor)) {
    return `names #${anchor}, which is no heading or id of ${page}`;
  }
  return undefined;
}

/** Every broken link between the built pages, as `page: href: problem`. */
export function pageLinkProblems(pages, dir = distDir, site = siteUrl) {
  const problems = [];
  for (const [page, { hrefs }] of pages) {
    for (const href of hrefs) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(href) && !href.startsWith(site)) continue;
      const problem = urlProblem(new URL(href, pageUrl(page, site)).href, pages, dir, site);
      if (problem) problems.push(`${page}: ${href} ${problem}`);
    }
  }
  return problems;
}

/** The string literals of the union type alias `name` declared in `file`. */
export function unionMembers(file, name) {
  const program = ts.createProgram([file], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    customConditions: ['@idem/source'],
    noEmit: true,
    skipLibCheck: true,
    types: [],
  });
  const source = program.getSourceFile(file);
  const alias = source?.statements.find(
    (statement) => ts.isTypeAliasDeclaration(statement) && statement.name.text === name,
  );
  if (!alias) throw new Error(`${file} declares no type ${name}`);
  const type = program.getTypeChecker().getTypeAtLocation(alias);
  const members = type.isUnion() ? type.types : [type];
  return members.map((member) => {
    if (!member.isStringLiteral()) throw new Error(`${name} has a member that is not a string`);
    return member.value;
  });
}

/** Every code @idem/server's error answers carry (its `RefusalCode`, read from the source). */
export const refusalCodes = () =>
  unionMembers(join(root, 'packages/server/src/adapter/refusals.ts'), 'RefusalCode');

/** The errors page's address and the link of each code, as the built @idem/server makes them. */
async function errorDocs() {
  const file = join(root, 'packages/server/dist/adapter/errorDocs.js');
  if (!existsSync(file)) {
    throw new Error(`${file} does not exist: build the packages first (pnpm build)`);
  }
  return import(pathToFileURL(file).href);
}

/** Each error code whose link does not resolve to an anchor of the built site. */
export function errorLinkProblems(codes, docsUrl, typeUrl, pages, dir = distDir, site = siteUrl) {
  if (!docsUrl.startsWith(site)) {
    return [`DEFAULT_ERROR_DOCS_URL (${docsUrl}) is not on the documentation site (${site})`];
  }
  return codes.flatMap((code) => {
    const url = typeUrl(docsUrl, code);
    const problem = urlProblem(url, pages, dir, site);
    return problem ? [`error code ${code}: ${url} ${problem}`] : [];
  });
}

/** Every link a markdown text makes to `${site}…`, with its line (from 1). */
export function siteLinks(markdown, site = siteUrl) {
  const pattern = new RegExp(`${site.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[^\\s)>"'\`\\]]*`, 'g');
  return markdown.split('\n').flatMap((line, index) =>
    [...line.matchAll(pattern)].map(([url]) => ({
      url: url.replace(/[.,;:]$/, ''),
      line: index + 1,
    })),
  );
}

/** The root README and each package's, relative to the repository root. */
export function readmes() {
  const packages = readdirSync(join(root, 'packages'))
    .map((name) => `packages/${name}/README.md`)
    .filter((path) => existsSync(join(root, path)));
  return ['README.md', ...packages];
}

/** Each link from a README to the site that does not resolve, as `README:line: url: problem`. */
export function readmeLinkProblems(pages, dir = distDir, site = siteUrl) {
  return readmes().flatMap((readme) =>
    siteLinks(readFileSync(join(root, readme), 'utf8'), site).flatMap(({ url, line }) => {
      const problem = urlProblem(url, pages, dir, site);
      return problem ? [`${readme}:${line}: ${url} ${problem}`] : [];
    }),
  );
}

async function main() {
  const pages = readSite(distDir);
  const { DEFAULT_ERROR_DOCS_URL, errorTypeUrl } = await errorDocs();
  const codes = refusalCodes();
  const problems = [
    ...pageLinkProblems(pages),
    ...errorLinkProblems(codes, DEFAULT_ERROR_DOCS_URL, errorTypeUrl, pages),
    ...readmeLinkProblems(pages),
  ];
  const links = [...pages.values()].reduce((sum, page) => sum + page.hrefs.length, 0);
  if (problems.length > 0) {
    console.error(`The built site has ${problems.length} broken link(s):\n${problems.join('\n')}`);
    process.exitCode = 1;
    return;
  }
  console.log(
    `links ok: ${links} links on ${pages.size} pages, ${codes.length} error codes, the READMEs' links to ${siteUrl}`,
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
