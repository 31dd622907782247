import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { installLines, installProject, outsideEnv, root } from './outsideInstall.js';
import { type ReadmeBlock, readmeBlocks } from './readmeBlocks.js';

/**
 * Every ```ts block of the READMEs runs as written, and every ```tsx block type-checks, in
 * a throwaway project outside the workspace: the packed tarballs plus what its README's
 * install lines name, at the workspace's versions. Projects are per README, so a package
 * one README names cannot make another's snippet pass, and a README's test tooling
 * (`npm install -D vitest`) is only in the project of its snippets that are vitest files:
 * the others run as an app's code does, without it. Each install comes from pnpm's store,
 * which the workspace install filled, in about a second.
 */
const run = promisify(execFile);
/**
 * Each snippet runs in a process of its own, started from the project's installed
 * binaries. A snippet that starts PGlite or a server takes seconds on an idle machine and
 * far longer on a loaded one, so its bound is generous: it only has to catch a hang.
 */
const SNIPPET_TIMEOUT_MS = 300_000;
const INSTALL_TIMEOUT_MS = 300_000;
const blocks = readmeBlocks(root, 'ts');
const reactBlocks = readmeBlocks(root, 'tsx');
const shBlocks = readmeBlocks(root, 'sh');
const outsideDir = inject('outsideDir');
const tarballs = inject('tarballs');

/** A snippet whose first line is a comment naming a `.test.ts` file is a vitest file. */
const isTestFile = (block: ReadmeBlock) => /^\/\/ \S+\.test\.ts\b/.test(block.code);

interface Project {
  dir: string;
  names: string[];
}

/**
 * Each README's projects: `app`, for its snippets, with what its install lines name for an
 * app, and `tests`, for its snippets that are vitest files, with its test tooling too. Both
 * add the tools this test drives them with, which a reader has already: tsx runs the
 * snippets; TypeScript and React's types check the React ones.
 */
const readmes = new Map(
  [...new Set([...blocks, ...reactBlocks].map((block) => block.readme))].map((readme) => {
    const lines = installLines(shBlocks.filter((b) => b.readme === readme).map((b) => b.code));
    // packages/<name>/README.md → <name>
    const slug = readme === 'README.md' ? 'root' : basename(dirname(readme));
    const tools = ['tsx'];
    if (reactBlocks.some((block) => block.readme === readme)) {
      tools.push('typescript', '@types/react');
    }
    const app: Project = { dir: join(outsideDir, slug), names: [...lines.dependencies, ...tools] };
    const tests: Project | undefined = blocks.some((b) => b.readme === readme && isTestFile(b))
      ? {
          dir: join(outsideDir, `${slug}-tests`),
          names: [...lines.dependencies, ...lines.devDependencies],
        }
      : undefined;
    return [readme, { lines, app, tests }] as const;
  }),
);
/** The projects of a README with snippets (every key of `readmes`). */
const projectsOf = (readme: string) => {
  const projects = readmes.get(readme);
  if (!projects) throw new Error(`no projects for ${readme}`);
  return projects;
};
const projectOf = (block: ReadmeBlock) => {
  const { app, tests } = projectsOf(block.readme);
  if (!isTestFile(block)) return app;
  if (!tests) throw new Error(`${block.readme} has a vitest snippet but no tests project`);
  return tests;
};

beforeAll(async () => {
  for (const { app, tests } of readmes.values()) {
    for (const project of tests ? [app, tests] : [app]) {
      await installProject(project.dir, project.names, tarballs);
    }
  }
}, INSTALL_TIMEOUT_MS);

describe('README install lines', () => {
  for (const [readme, { lines, tests }] of readmes) {
    it(`${readme} names idem, and vitest for tests if a snippet is a vitest file`, () => {
      expect(lines.dependencies.filter((name) => name.startsWith('@idem/'))).not.toEqual([]);
      if (tests) expect(lines.devDependencies).toContain('vitest');
    });
  }
});

describe('README snippets run as written', () => {
  it('has snippets to run', () => {
    expect(blocks.length).toBeGreaterThan(10);
  });

  for (const [index, block] of blocks.entries()) {
    it(
      `${block.readme}: ${block.heading} (line ${block.line})`,
      async () => {
        const { dir } = projectOf(block);
        const testFile = isTestFile(block);
        const file = join(
          dir,
          'snippets',
          `snippet-${String(index).padStart(2, '0')}${testFile ? '.test' : ''}.ts`,
        );
        mkdirSync(join(dir, 'snippets'), { recursive: true });
        writeFileSync(file, block.code);
        const bin = join(dir, 'node_modules/.bin');
        // The vitest run has the project's own defaults: no config of the workspace's.
        const [binary, args]: [string, string[]] = testFile
          ? [join(bin, 'vitest'), ['run', file, '--testTimeout=120000', '--hookTimeout=120000']]
          : [join(bin, 'tsx'), [file]];
        const { stderr } = await run(binary, args, {
          cwd: dir,
          timeout: SNIPPET_TIMEOUT_MS,
          env: { ...outsideEnv(), NODE_NO_WARNINGS: '1' },
        });
        if (!testFile) expect(stderr).toBe('');
      },
      SNIPPET_TIMEOUT_MS + 10_000,
    );
  }
});

/**
 * The React snippets (```tsx) are components: here they are type-checked as a Next.js app
 * compiles them (bundler resolution, the automatic JSX runtime, the packages' shipped
 * types) against the `./trpc` module every one of them imports: the app's
 * `createTRPCContext<AppRouter>()` for a router with `order.place`. They are also
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

describe('README React snippets compile as written', () => {
  it('has React snippets to compile', () => {
    expect(reactBlocks.length).toBeGreaterThanOrEqual(2);
  });

  for (const readme of new Set(reactBlocks.map((block) => block.readme))) {
    it(
      `type-checks every \`\`\`tsx block of ${readme} against an app router`,
      async () => {
        const dir = join(projectsOf(readme).app.dir, 'react');
        mkdirSync(dir, { recursive: true });
        writeFileSync(join(dir, 'trpc.ts'), TRPC_MODULE);
        const names = reactBlocks
          .filter((block) => block.readme === readme)
          .map((block, index) => {
            const name = `snippet-${String(index).padStart(2, '0')}.tsx`;
            writeFileSync(
              join(dir, name),
              `// ${block.readme}: ${block.heading} (line ${block.line})\n${block.code}`,
            );
            return name;
          });
        writeFileSync(
          join(dir, 'tsconfig.json'),
          JSON.stringify({ ...REACT_TSCONFIG, files: ['trpc.ts', ...names] }),
        );
        const tsc = join(dir, '../node_modules/.bin/tsc');
        const output = await run(tsc, ['-p', join(dir, 'tsconfig.json')], {
          cwd: dir,
          env: outsideEnv(),
        }).then(
          ({ stdout }) => stdout,
          (error: { stdout?: string; message: string }) => error.stdout || error.message,
        );
        expect(output).toBe('');
      },
      SNIPPET_TIMEOUT_MS,
    );
  }
});
