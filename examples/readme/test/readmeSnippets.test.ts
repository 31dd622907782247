import { execFile } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { readmeBlocks } from './readmeBlocks.js';

const run = promisify(execFile);
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const root = fileURLToPath(new URL('../../../', import.meta.url));
/**
 * Each snippet runs in a process of its own, started from the installed binaries rather
 * than through `npx` (which costs a package look-up per snippet). A snippet that starts
 * PGlite or a server takes seconds on an idle machine and far longer on a loaded one, so
 * its bound is generous: it only has to catch a hang, not a slow machine.
 */
const SNIPPET_TIMEOUT_MS = 300_000;
const tsx = `${packageDir}node_modules/.bin/tsx`;
const vitest = `${root}node_modules/.bin/vitest`;
const tsc = `${root}node_modules/.bin/tsc`;
const blocks = readmeBlocks(root, 'ts');
const workDir = `${packageDir}.snippets`;
rmSync(workDir, { recursive: true, force: true });
mkdirSync(workDir, { recursive: true });

describe('README snippets run as written', () => {
  it('has snippets to run', () => {
    expect(blocks.length).toBeGreaterThan(10);
  });

  for (const [index, block] of blocks.entries()) {
    it(
      `${block.readme}: ${block.heading} (line ${block.line})`,
      async () => {
        // A snippet whose first line is a comment naming a `.test.ts` file is a vitest file.
        const isTestFile = /^\/\/ \S+\.test\.ts\b/.test(block.code);
        const file = `${workDir}/snippet-${String(index).padStart(2, '0')}${isTestFile ? '.test' : ''}.ts`;
        writeFileSync(file, block.code);
        const [binary, ...args] = isTestFile
          ? [vitest, 'run', '--config', 'vitest.snippets.config.ts', file]
          : [tsx, '--conditions=@idem/source', file];
        const { stderr } = await run(binary!, args, {
          cwd: packageDir,
          timeout: SNIPPET_TIMEOUT_MS,
          env: { ...process.env, NODE_NO_WARNINGS: '1' },
        });
        if (!isTestFile) expect(stderr).toBe('');
      },
      SNIPPET_TIMEOUT_MS + 10_000,
    );
  }
});

/**
 * The React snippets (```tsx) are components: here they are type-checked as a Next.js app
 * compiles them (bundler resolution, the automatic JSX
 * runtime) against the `./trpc` module every one of them imports: the app's
 * `createTRPCContext<AppRouter>()` for a router with `order.place`. They are also
 * rendered and clicked, against a server with `idempotent()`, in
 * `readmeReactSnippets.test.ts`.
 */
const TRPC_MODULE = `import { initTRPC } from '@trpc/server';
import { createTRPCContext } from '@trpc/tanstack-react-query';
import { z } from 'zod';

const t = initTRPC.create();
const appRouter = t.router({
  order: t.router({
    place: t.procedure
      .input(z.object({ sku: z.string() }))
      .mutation(({ input }) => ({ orderId: 1, sku: input.sku })),
  }),
});
export type AppRouter = typeof appRouter;
export const { TRPCProvider, useTRPC } = createTRPCContext<AppRouter>();
`;

const reactBlocks = readmeBlocks(root, 'tsx');

describe('README React snippets compile as written', () => {
  it('has React snippets to compile', () => {
    expect(reactBlocks.length).toBeGreaterThanOrEqual(2);
  });

  it(
    'type-checks every ```tsx block against an app router',
    async () => {
      const dir = `${workDir}/react`;
      mkdirSync(dir, { recursive: true });
      writeFileSync(`${dir}/trpc.ts`, TRPC_MODULE);
      const names = reactBlocks.map((block, index) => {
        const name = `snippet-${String(index).padStart(2, '0')}.tsx`;
        writeFileSync(
          `${dir}/${name}`,
          `// ${block.readme}: ${block.heading} (line ${block.line})\n${block.code}`,
        );
        return name;
      });
      writeFileSync(
        `${dir}/tsconfig.json`,
        JSON.stringify({
          extends: '../../../../tsconfig.base.json',
          compilerOptions: {
            module: 'ESNext',
            moduleResolution: 'Bundler',
            jsx: 'react-jsx',
            noEmit: true,
            declaration: false,
            declarationMap: false,
            sourceMap: false,
            types: [],
          },
          files: ['trpc.ts', ...names],
        }),
      );
      const output = await run(tsc, ['-p', `${dir}/tsconfig.json`], { cwd: packageDir }).then(
        ({ stdout }) => stdout,
        (error: { stdout?: string; message: string }) => error.stdout || error.message,
      );
      expect(output).toBe('');
    },
    SNIPPET_TIMEOUT_MS,
  );
});
