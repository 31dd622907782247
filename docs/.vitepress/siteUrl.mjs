/**
 * Where the documentation site is published (a GitHub Pages project site): every page's
 * address starts with it, and the packages' READMEs and error answers link into it
 * (`${siteUrl}guide/errors#invalid_key`). Ends in `/`.
 */
export const siteUrl = 'https://idem-js.github.io/idem/';
