import postgres from 'postgres';

/**
 * The Postgres pass of the docs' snippets: a snippet written for PGlite (an embedded
 * Postgres, one connection) runs a second time on a Postgres server through postgres-js
 * (a pool), where a query on `db` inside a transaction, or a result read in PGlite's shape
 * (`{ rows }`), fails. The convention the rewrite relies on: the snippet imports `PGlite`
 * from '@electric-sql/pglite', opens it once as `const <name> = new PGlite(…)`, hands it to
 * `drizzle` from 'drizzle-orm/pglite' and ends with `await <name>.close()`. A snippet that is
 * PGlite-only on purpose starts with the line `// PGlite only`.
 */

/** Whether `code` is a snippet for the Postgres pass: it opens PGlite and is not PGlite-only. */
export function usesPglite(code: string): boolean {
  return code.includes('new PGlite(') && !code.trimStart().startsWith('// PGlite only');
}

/** `code` with its PGlite database replaced by postgres-js on `url`; throws what it cannot. */
export function toPostgresJs(code: string, url: string): string {
  const opened = [...code.matchAll(/(?:const|let|var)\s+(\w+)\s*=\s*new PGlite\(/g)];
  const name = opened[0]?.[1];
  if (opened.length !== 1 || name === undefined || code.split('new PGlite(').length !== 2) {
    throw new Error(
      'the Postgres pass rewrites a snippet that opens PGlite once, as `const client = new PGlite()`, ' +
        'and closes it with `await client.close()`; start the snippet with `// PGlite only` if it ' +
        'is meant for PGlite alone',
    );
  }
  const rewritten = code
    .replace(
      /import\s*\{\s*PGlite\s*\}\s*from\s*['"]@electric-sql\/pglite['"];?/,
      "import postgres from 'postgres';",
    )
    .replace(/new PGlite\((?:[^()]|\([^()]*\))*\)/, `postgres(${JSON.stringify(url)})`)
    .replaceAll(/(['"])drizzle-orm\/pglite\1/g, "'drizzle-orm/postgres-js'")
    .replaceAll(new RegExp(`\\b${name}\\.close\\(\\)`, 'g'), `${name}.end()`);
  if (rewritten.includes('@electric-sql/pglite')) {
    throw new Error(
      "the Postgres pass found an import of '@electric-sql/pglite' other than `import { PGlite } " +
        "from '@electric-sql/pglite'`: import only PGlite, or start the snippet with `// PGlite only`",
    );
  }
  if (!rewritten.includes(`${name}.end()`)) {
    throw new Error(
      `the snippet never closes its database (\`await ${name}.close()\`), so postgres-js's pool ` +
        'would keep the process alive',
    );
  }
  return rewritten;
}

/** The server the Postgres pass runs on (the tests' `DATABASE_URL`). */
export const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * A fresh database on the server for one snippet, named `name`, and the function that drops
 * it (with any connection the snippet left open).
 */
export async function scratchDatabase(
  name: string,
): Promise<{ url: string; drop: () => Promise<void> }> {
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.unsafe(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.href,
    drop: async () => {
      const dropper = postgres(serverUrl, { max: 1, onnotice: () => {} });
      try {
        await dropper.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await dropper.end();
      }
    },
  };
}
