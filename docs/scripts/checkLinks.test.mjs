import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  errorLinkProblems,
  pageLinkProblems,
  pageUrl,
  readSite,
  refusalCodes,
  siteLinks,
  urlProblem,
} from './checkLinks.mjs';

const site = 'https://example.test/docs/';
const dir = mkdtempSync(join(tmpdir(), 'idem-links-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Writes a built page of the fake site. */
function page(path, body) {
  mkdirSync(dirname(join(dir, path)), { recursive: true });
  writeFileSync(join(dir, path), `<html><body>${body}</body></html>`);
}
page('index.html', '<h1 id="idem">idem</h1><a href="/docs/guide/keys#per-call">keys</a>');
page(
  'guide/keys.html',
  [
    '<h2 id="per-call" tabindex="-1">Per call</h2>',
    '<h2 id="a&amp;b">A &amp; B</h2>',
    '<a href="./errors#invalid_key">x</a>',
    '<a href="#a&amp;b">x</a>',
    '<a href="https://github.com/x#y">external</a>',
    '<a href="mailto:a@b.c">mail</a>',
    '<a href="/docs/logo.svg">logo</a>',
  ].join(''),
);
page('guide/errors.html', '<h2 id="invalid_key">INVALID_KEY</h2>');
page(
  'api/index.html',
  '<a href="../guide/keys#per-intent">broken anchor</a><a href="/other">x</a>',
);
writeFileSync(join(dir, 'logo.svg'), '<svg/>');
const pages = readSite(dir);
const problem = (url) => urlProblem(url, pages, dir, site);

describe('the link check of the built site', () => {
  it('reads each page, its ids (entities decoded) and its links', () => {
    expect([...pages.keys()].sort()).toEqual([
      'api/index.html',
      'guide/errors.html',
      'guide/keys.html',
      'index.html',
    ]);
    expect(pages.get('guide/keys.html')?.ids).toEqual(new Set(['per-call', 'a&b']));
    expect(pages.get('guide/keys.html')?.hrefs).toContain('#a&b');
  });

  it('serves each page at its clean address', () => {
    expect(pageUrl('guide/keys.html', site)).toBe(`${site}guide/keys`);
    expect(pageUrl('api/index.html', site)).toBe(`${site}api/`);
    expect(pageUrl('index.html', site)).toBe(site);
  });

  it('accepts a built page, an anchor on it, a file, and anything off the site', () => {
    expect(problem(`${site}guide/keys#per-call`)).toBeUndefined();
    expect(problem(`${site}guide/keys.html`)).toBeUndefined();
    expect(problem(`${site}api/`)).toBeUndefined();
    expect(problem(site)).toBeUndefined();
    expect(problem(`${site}logo.svg`)).toBeUndefined();
    expect(problem('https://github.com/x#y')).toBeUndefined();
  });

  it('names a missing page, a missing anchor and a link outside the base', () => {
    expect(problem(`${site}guide/nope`)).toMatch(/names no built page/);
    expect(problem(`${site}guide/keys#per-intent`)).toMatch(/#per-intent, which is no heading/);
    expect(problem('https://example.test/other')).toMatch(/outside the site/);
  });

  it('lists every broken link between the pages, by page', () => {
    expect(pageLinkProblems(pages, dir, site)).toEqual([
      'api/index.html: ../guide/keys#per-intent names #per-intent, which is no heading or id of guide/keys.html',
      'api/index.html: /other is outside the site, whose pages are under /docs/',
    ]);
  });

  it("checks each error code's link against the errors page", () => {
    const typeUrl = (docsUrl, code) => `${docsUrl}#${code.toLowerCase()}`;
    const docsUrl = `${site}guide/errors`;
    expect(errorLinkProblems(['INVALID_KEY'], docsUrl, typeUrl, pages, dir, site)).toEqual([]);
    expect(errorLinkProblems(['KEY_MISMATCH'], docsUrl, typeUrl, pages, dir, site)).toEqual([
      `error code KEY_MISMATCH: ${docsUrl}#key_mismatch names #key_mismatch, which is no heading or id of guide/errors.html`,
    ]);
    expect(
      errorLinkProblems(['INVALID_KEY'], 'https://elsewhere.test/', typeUrl, pages, dir, site),
    ).toEqual([
      `DEFAULT_ERROR_DOCS_URL (https://elsewhere.test/) is not on the documentation site (${site})`,
    ]);
  });

  it('finds the links a README makes to the site, with their lines', () => {
    const markdown = `intro\nsee [keys](${site}guide/keys#per-call).\n<${site}api/>, and ${site}guide/errors.`;
    expect(siteLinks(markdown, site)).toEqual([
      { url: `${site}guide/keys#per-call`, line: 2 },
      { url: `${site}api/`, line: 3 },
      { url: `${site}guide/errors`, line: 3 },
    ]);
  });

  it("reads @idem/server's error codes from its RefusalCode type", () => {
    const codes = refusalCodes();
    expect(codes).toContain('INVALID_KEY');
    expect(codes).toContain('INPUT_TOO_LARGE');
    expect(codes).toContain('INVALID_BODY');
    expect(new Set(codes).size).toBe(codes.length);
  });
});
