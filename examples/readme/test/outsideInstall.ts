import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/**
 * Throwaway projects outside the workspace, installed the way a reader installs idem: the
 * packed tarballs (what `pnpm publish` uploads) and the registry packages a README names,
 * nothing else. What a snippet imports resolves only through the project's own
 * node_modules, so a missing install line or an entry that needs a devDependency fails
 * here, as it would in a reader's app, where the workspace would hide it.
 */

const run = promisify(execFile);
export const root = fileURLToPath(new URL('../../../', import.meta.url));
const packageDir = fileURLToPath(new URL('../', import.meta.url));

/** Name → the `.tgz` `pnpm pack` wrote, one per published package under packages/. */
export type Tarballs = Record<string, string>;

/** Builds the published packages through turbo (a cache hit when nothing changed). */
export async function buildPackages(): Promise<void> {
  await run(
    'pnpm',
    ['exec', 'turbo', 'run', 'build', '--filter=./packages/*', '--output-logs=errors-only'],
    { cwd: root, maxBuffer: 16 * 1024 * 1024 },
  );
}

/**
 * Packs every package under packages/ into `dir`: the tarball `pnpm publish` would upload,
 * `workspace:*` already replaced by a version.
 */
export async function packPackages(dir: string): Promise<Tarballs> {
  mkdirSync(dir, { recursive: true });
  const packed = await Promise.all(
    readdirSync(join(root, 'packages'))
      .map((name) => join(root, 'packages', name))
      .filter((path) => existsSync(join(path, 'package.json')))
      .map(async (path) => {
        const { stdout } = await run('pnpm', ['pack', '--json', '--pack-destination', dir], {
          cwd: path,
          maxBuffer: 16 * 1024 * 1024,
        });
        const { name, filename } = JSON.parse(stdout) as { name: string; filename: string };
        return [name, filename] as const;
      }),
  );
  return Object.fromEntries(packed);
}

/** What a README's install lines name: for the app, and (`-D`, `--save-dev`) for its tests. */
export interface InstallLines {
  dependencies: string[];
  devDependencies: string[];
}

/**
 * The packages the ```sh blocks of a README tell a reader to install (`npm install …`,
 * `npm i …`, `pnpm add …`, `yarn add …`; a global install is a tool, not a dependency),
 * by name: the versions come from the workspace.
 */
export function installLines(shBlocks: readonly string[]): InstallLines {
  const lines: InstallLines = { dependencies: [], devDependencies: [] };
  for (const command of shBlocks.flatMap((code) => code.split(/\n|&&|;/))) {
    const words = command.trim().split(/\s+/);
    const verb = words.slice(0, 2).join(' ');
    if (!['npm install', 'npm i', 'npm add', 'pnpm add', 'yarn add'].includes(verb)) continue;
    const args = words.slice(2);
    if (args.includes('-g') || args.includes('--global')) continue;
    const dev = args.some((arg) => ['-D', '--save-dev', '--dev'].includes(arg));
    for (const arg of args.filter((word) => !word.startsWith('-'))) {
      lines[dev ? 'devDependencies' : 'dependencies'].push(arg.replace(/(.)@[^/]*$/, '$1'));
    }
  }
  return lines;
}

/** The version of `name` the workspace's lockfile installed (this package's, else the root's). */
export function workspaceVersion(name: string): string {
  for (const dir of [packageDir, root]) {
    const manifest = join(dir, 'node_modules', name, 'package.json');
    if (existsSync(manifest)) return JSON.parse(readFileSync(manifest, 'utf8')).version;
  }
  throw new Error(
    `${name} is not installed in the workspace, so its version cannot be pinned: add it to ` +
      'examples/readme/package.json devDependencies',
  );
}

/** A project dir must see no package.json, node_modules or workspace file above it. */
export function assertOutsideWorkspace(dir: string): void {
  const resolved = resolve(dir);
  if (`${resolved}${sep}`.startsWith(root)) throw new Error(`${dir} is inside the workspace`);
  for (let parent = dirname(resolved); ; parent = dirname(parent)) {
    for (const name of ['node_modules', 'package.json', 'pnpm-workspace.yaml']) {
      if (existsSync(join(parent, name))) {
        throw new Error(`${join(parent, name)} is visible from ${dir}: resolution could use it`);
      }
    }
    if (dirname(parent) === parent) return;
  }
}

/**
 * The environment for an install or a snippet: this run's, without anything that leads back
 * into the workspace (its node_modules/.bin on PATH, a variable naming one of its folders,
 * NODE_PATH and NODE_OPTIONS). Registry and store settings stay, as a reader's would.
 */
export function outsideEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key === 'NODE_PATH' || key === 'NODE_OPTIONS' || value?.includes(root.slice(0, -1))) {
      continue;
    }
    env[key] = value;
  }
  env.PATH = (process.env.PATH ?? '')
    .split(':')
    .filter((entry) => !`${resolve(entry)}${sep}`.startsWith(root))
    .join(':');
  return env;
}

/**
 * Creates the project `dir` with `names` as its dependencies (an idem package from its
 * tarball, any other at the workspace's version) and installs it with pnpm, whose store the
 * workspace install already filled. Peers are not installed for us: what a README leaves
 * out of its install lines is missing here too.
 */
export async function installProject(
  dir: string,
  names: readonly string[],
  tarballs: Tarballs,
): Promise<void> {
  mkdirSync(dir, { recursive: true });
  assertOutsideWorkspace(dir);
  const dependencies = Object.fromEntries(
    names.map((name) => [name, tarballs[name] ? `file:${tarballs[name]}` : workspaceVersion(name)]),
  );
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: 'readme-reader', private: true, type: 'module', dependencies }),
  );
  // pnpm reads these settings only from a workspace file. The overrides send the tarballs'
  // own `@idem/core` dependency to its tarball, which no registry has. esbuild (under tsx
  // and vitest) has an install script, which pnpm fails on unless told: allowed, as in the
  // workspace.
  const overrides = Object.entries(tarballs).map(([name, file]) => `  "${name}": "file:${file}"`);
  writeFileSync(
    join(dir, 'pnpm-workspace.yaml'),
    [
      'autoInstallPeers: false',
      'allowBuilds:',
      '  esbuild: true',
      'overrides:',
      ...overrides,
      '',
    ].join('\n'),
  );
  // CI=true would make pnpm demand a lockfile, which a throwaway project has none of.
  await run('pnpm', ['install', '--prefer-offline', '--no-frozen-lockfile'], {
    cwd: dir,
    env: outsideEnv(),
    maxBuffer: 16 * 1024 * 1024,
  }).catch((error: { stdout?: string; stderr?: string; message: string }) => {
    throw new Error(`pnpm install in ${dir} failed:\n${error.stdout ?? ''}${error.stderr ?? ''}`);
  });
}
