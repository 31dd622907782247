import { describe, expect, it } from 'vitest';
import { toPostgresJs, usesPglite } from './postgresPass.js';

const snippet = `import { PGlite } from '@electric-sql/pglite';
import { drizzle } from 'drizzle-orm/pglite';

const client = new PGlite();
const db = drizzle(client);
await db.execute('select 1');
await client.close();
`;

describe('the Postgres pass of the docs snippets', () => {
  it('takes the snippets that open PGlite, not the PGlite-only ones', () => {
    expect(usesPglite(snippet)).toBe(true);
    expect(usesPglite(`// PGlite only\n${snippet}`)).toBe(false);
    expect(usesPglite("import { drizzleStore } from '@idem/server/postgres';")).toBe(false);
  });

  it('rewrites the import, the client, the drizzle driver and the close to postgres-js', () => {
    expect(toPostgresJs(snippet, 'postgres://h/db')).toBe(`import postgres from 'postgres';
import { drizzle } from 'drizzle-orm/postgres-js';

const client = postgres("postgres://h/db");
const db = drizzle(client);
await db.execute('select 1');
await client.end();
`);
  });

  it('replaces PGlite options along with the constructor', () => {
    const code = snippet.replace('new PGlite()', "new PGlite({ dataDir: dir('x') })");
    expect(toPostgresJs(code, 'postgres://h/db')).toContain(
      'const client = postgres("postgres://h/db");',
    );
  });

  it('refuses, saying what to do, a snippet it cannot rewrite', () => {
    expect(() => toPostgresJs(snippet.replace('await client.close();\n', ''), 'u')).toThrow(
      /never closes its database/,
    );
    expect(() => toPostgresJs(`${snippet}const other = new PGlite();\n`, 'u')).toThrow(
      /opens PGlite once.*PGlite only/s,
    );
    expect(() => toPostgresJs(snippet.replace('const client = new', 'drizzle(new'), 'u')).toThrow(
      /opens PGlite once/,
    );
    expect(() =>
      toPostgresJs(`import { types } from '@electric-sql/pglite';\n${snippet}`, 'u'),
    ).toThrow(/other than `import \{ PGlite \}/);
  });
});
