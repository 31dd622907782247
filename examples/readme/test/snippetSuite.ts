import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { installLines, installProject, outsideEnv, root } from './outsideInstall.js';
import { scratchDatabase, toPostgresJs, usesPglite } from './postgresPass.js';
import { blocksIn, type ReadmeBlock } from './readmeBlocks.js';

/**
 * The snippet suite of a set of markdown files (the READMEs, the docs pages): every ```ts
 * block runs as written, and every ```tsx block type-checks, in a throwaway project outside
 * the workspace: the packed tarballs plus what the file's install lines name, at the
 * workspace's versions. Projects are per file, so a package one file names cannot make
 * another's snippet pass, and a file's test tooling (`npm install -D vitest`) is only in the
 * project of its snippets that are vitest files: the others run as an app's code does,
 * without it. Each install comes from pnpm's store, which the workspace install filled.
 */
const run = promisify(execFile);
/**
 * Each snippet runs in a process of its own, started from the project's installed
 * binaries. A snippet that starts PGlite or a server takes seconds on an idle machine and
 * far longer on a loaded one, so its bound is generous: it only has to catch a hang.
 */
const SNIPPET_TIMEOUT_MS = 300_000;
const INSTALL_TIMEOUT_MS = 600_000;

export interface SnippetSuite {
  /** What the files are, in the tests' names: `README`, `docs page`. */
  what: string;
  /** The markdown files, relative to the repository root. */
  files: readonly string[];
  /** The fewest ```ts blocks the files hold (a parser that finds none must fail). */
  minSnippets: number;
  /** The fewest ```tsx blocks. */
  minReactSnippets: number;
  /**
   * Run each snippet that opens PGlite a second time, rewritten to postgres-js on a scratch
   * database of the server at `DATABASE_URL` (see postgresPass.ts).
   */
  postgresPass: boolean;
}

/** A snippet whose first line is a comment naming a `.test.ts` file is a vitest file. */
const isTestFile = (block: ReadmeBlock) => /^\/\/ \S+\.test\.ts\b/.test(block.code);

/** Where a block is, for a test's name and a failure: `file:line (heading)`. */
export const whereIs = (block: ReadmeBlock) => `${block.readme}:${block.line} (${block.heading})`;

interface Project {
  dir: string;
  names: string[];
}

/** A file's folder name among the projects: packages/<name>/README.md → <name>. */
function slugOf(file: string): string {
  if (file === 'README.md') return 'root';
  const packageReadme = /^packages\/([^/]+)\/README\.md$/.exec(file);
  if (packageReadme?.[1]) return packageReadme[1];
  return file.replace(/\.md$/, '').replaceAll(/[^\w-]+/g, '-');
}

/** Runs `block` (written to `file`) in `dir`; a failure names the block's file, line and heading. */
async function runSnippet(dir: string, file: string, block: ReadmeBlock, code: string) {
  const testFile = isTestFile(block);
  mkdirSync(join(dir, 'snippets'), { recursive: true });
  writeFileSync(file, code);
  const bin = join(dir, 'node_modules/.bin');
  // The vitest run has the project's own defaults: no config of the workspace's.
  const [binary, args]: [string, string[]] = testFile
    ? [join(bin, 'vitest'), ['run', file, '--testTimeout=120000', '--hookTimeout=120000']]
    : [join(bin, 'tsx'), [file]];
  const { stderr } = await run(binary, args, {
    cwd: dir,
    timeout: SNIPPET_TIMEOUT_MS,
    env: { ...outsideEnv(), NODE_NO_WARNINGS: '1' },
    maxBuffer: 16 * 1024 * 1024,
  }).catch((error: { stdout?: string; stderr?: string; message: string }) => {
    throw new Error(
      `the snippet at ${whereIs(block)} failed (${file}):\n${error.stderr || error.message}\n${error.stdout ?? ''}`,
    );
  });
  if (!testFile) expect(stderr, `stderr of the snippet at ${whereIs(block)}`).toBe('');
}

/** Registers the suite's tests (install lines, ```ts runs, the Postgres pass, ```tsx checks). */
export function snippetSuite(suite: SnippetSuite): void {
  const blocks = blocksIn(root, suite.files, 'ts');
  const reactBlocks = blocksIn(root, suite.files, 'tsx');
  const shBlocks = blocksIn(root, suite.files, 'sh');
  const outsideDir = inject('outsideDir');
  const tarballs = inject('tarballs');

  /**
   * Each file's projects: `app`, for its snippets, with what its install lines name for an
   * app, and `tests`, for its snippets that are vitest files, with its test tooling too.
   * Both add the tools this suite drives them with, which a reader has already: tsx runs the
   * snippets; TypeScript and React's types check the React ones; postgres-js is the driver
   * the Postgres pass swaps in.
   */
  const projects = new Map(
    [...new Set([...blocks, ...reactBlocks].map((block) => block.readme))].map((file) => {
      const lines = installLines(shBlocks.filter((b) => b.readme === file).map((b) => b.code));
      const slug = slugOf(file);
      const own = blocks.filter((block) => block.readme === file);
      const tools = ['tsx'];
      if (reactBlocks.some((block) => block.readme === file)) {
        tools.push('typescript', '@types/react');
      }
      if (suite.postgresPass && own.some((block) => usesPglite(block.code))) tools.push('postgres');
      const dependencies = [...new Set(lines.dependencies)];
      const app: Project = { dir: join(outsideDir, slug), names: [...dependencies, ...tools] };
      const tests: Project | undefined = own.some(isTestFile)
        ? {
            dir: join(outsideDir, `${slug}-tests`),
            names: [...new Set([...dependencies, ...lines.devDependencies, ...tools])],
          }
        : undefined;
      return [file, { lines, app, tests }] as const;
    }),
  );
  const projectsOf = (file: string) => {
    const found = projects.get(file);
    if (!found) throw new Error(`no projects for ${file}`);
    return found;
  };
  const projectOf = (block: ReadmeBlock) => {
    const { app, tests } = projectsOf(block.readme);
    if (!isTestFile(block)) return app;
    if (!tests) throw new Error(`${block.readme} has a vitest snippet but no tests project`);
    return tests;
  };
  const fileOf = (block: ReadmeBlock, index: number, pass = '') =>
    join(
      projectOf(block).dir,
      'snippets',
      `snippet-${String(index).padStart(2, '0')}${pass}${isTestFile(block) ? '.test' : ''}.ts`,
    );

  beforeAll(async () => {
    for (const { app, tests } of projects.values()) {
      for (const project of tests ? [app, tests] : [app]) {
        await installProject(project.dir, project.names, tarballs);
      }
    }
  }, INSTALL_TIMEOUT_MS);

  describe(`${suite.what} install lines`, () => {
    for (const [file, { lines, tests }] of projects) {
      it(`${file} names idem, and vitest for tests if a snippet is a vitest file`, () => {
        expect(
          lines.dependencies.filter((name) => name.startsWith('@idem/')),
          `${file} has snippets but no \`npm install @idem/…\` line in a \`\`\`sh block`,
        ).not.toEqual([]);
        if (tests) expect(lines.devDependencies).toContain('vitest');
      });
    }
  });

  describe(`${suite.what} snippets run as written`, () => {
    it('has snippets to run', () => {
      expect(blocks.length).toBeGreaterThanOrEqual(suite.minSnippets);
    });

    for (const [index, block] of blocks.entries()) {
      it(
        `${block.readme}: ${block.heading} (line ${block.line})`,
        async () => {
          await runSnippet(projectOf(block).dir, fileOf(block, index), block, block.code);
        },
        SNIPPET_TIMEOUT_MS + 10_000,
      );
    }
  });

  if (suite.postgresPass) {
    describe(`${suite.what} snippets on a Postgres server (the PGlite ones, on postgres-js)`, () => {
      for (const [index, block] of blocks.entries()) {
        if (!usesPglite(block.code)) continue;
        it(
          `${block.readme}: ${block.heading} (line ${block.line}), on postgres-js`,
          async () => {
            let code: string;
            try {
              code = toPostgresJs(block.code, 'postgres://unused');
            } catch (error) {
              throw new Error(`the snippet at ${whereIs(block)}: ${(error as Error).message}`);
            }
            const database = await scratchDatabase(`idem_snippet_${process.pid}_${index}`);
            try {
              code = toPostgresJs(block.code, database.url);
              await runSnippet(projectOf(block).dir, fileOf(block, index, '-pg'), block, code);
            } finally {
              await database.drop();
            }
          },
          SNIPPET_TIMEOUT_MS + 30_000,
        );
      }
    });
  }

  describe(`${suite.what} React snippets compile as written`, () => {
    it('has React snippets to compile', () => {
      expect(reactBlocks.length).toBeGreaterThanOrEqual(suite.minReactSnippets);
    });

    for (const file of new Set(reactBlocks.map((block) => block.readme))) {
      it(
        `type-checks every \`\`\`tsx block of ${file} against an app router`,
        async () => {
          const dir = join(projectsOf(file).app.dir, 'react');
          const own = reactBlocks.filter((block) => block.readme === file);
          expect(await typeCheckReact(dir, own)).toBe('');
        },
        SNIPPET_TIMEOUT_MS,
      );
    }
  });
}

/**
 * The React snippets (```tsx) are components: here they are type-checked as a Next.js app
 * compiles them (bundler resolution, the automatic JSX runtime, the packages' shipped
 * types), the tRPC components against the `./trpc` module they import: the app's
 * `createTRPCContext<AppRouter>()` for a router with `order.place`. The READMEs' are also
 * rendered and clicked, against a server with `idempotent()`, in
 * `readmeReactSnippets.test.ts` (from the workspace's sources).
 */
const TRPC_MODULE = `import { initTRPC } from '@trpc/server';
import { createTRPCContext } from '@trpc/tanstack-react-query';

const t = initTRPC.create();
const appRouter = t.router({
  order: t.router({
    place: t.procedure
      .input((value) => value as { sku: string })
      .mutation(({ input }) => ({ orderId: 1, sku: input.sku })),
  }),
});
export type AppRouter = typeof appRouter;
export const { TRPCProvider, useTRPC } = createTRPCContext<AppRouter>();
`;

/** A Next.js app's compiler settings, as strict as the workspace's own. */
const REACT_TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    lib: ['ES2023', 'DOM', 'DOM.Iterable'],
    module: 'ESNext',
    moduleResolution: 'Bundler',
    jsx: 'react-jsx',
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    isolatedModules: true,
    skipLibCheck: true,
    noEmit: true,
    types: [],
  },
};

/** What tsc says about `blocks` in `dir` (inside a project with TypeScript): '' when they pass. */
async function typeCheckReact(dir: string, blocks: readonly ReadmeBlock[]): Promise<string> {
  mkdirSync(dir, { recursive: true });
  // The app's tRPC module, for the components that import it (it needs tRPC installed).
  const trpc = blocks.some((block) => /from '\.\/trpc(\.js)?'/.test(block.code));
  if (trpc) writeFileSync(join(dir, 'trpc.ts'), TRPC_MODULE);
  const names = blocks.map((block, index) => {
    const name = `snippet-${String(index).padStart(2, '0')}.tsx`;
    writeFileSync(join(dir, name), `// ${whereIs(block)}\n${block.code}`);
    return name;
  });
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ ...REACT_TSCONFIG, files: [...(trpc ? ['trpc.ts'] : []), ...names] }),
  );
  const tsc = join(dir, '../node_modules/.bin/tsc');
  return run(tsc, ['-p', join(dir, 'tsconfig.json')], { cwd: dir, env: outsideEnv() }).then(
    ({ stdout }) => stdout,
    (error: { stdout?: string; message: string }) => error.stdout || error.message,
  );
}
