/**
 * `tsx src/tools/summarizeProfile.ts <file.cpuprofile | folder> [functionName,…]`: where a
 * CPU profile (`node --cpu-prof`) spent its time, as self time by package and by function,
 * plus the inclusive time of the named functions. With a folder, the largest profile in it
 * (a process's main thread; the smaller ones are loader threads).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { entry } from '../lib/required.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  /** µs on the monotonic clock (`process.hrtime`). */
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Only the samples taken between these two instants (µs, monotonic clock). */
export interface SampleWindow {
  fromUs: number;
  toUs: number;
}

export interface ProfileSummary {
  totalMs: number;
  byPackage: [string, number][];
  byFunction: [string, number][];
  inclusive: [string, number][];
}

/** The package a script URL belongs to: a pnpm package, an idem package, or Node itself. */
function packageOf(url: string, functionName: string): string {
  const pnpm = /node_modules\/\.pnpm\/([^/]+)\//.exec(url)?.[1];
  if (pnpm) return pnpm.replace(/_.*$/, '');
  const idem = /\/packages\/([^/]+)\//.exec(url)?.[1];
  if (idem) return `@idem/${idem}`;
  if (url.startsWith('node:')) return 'node (internals)';
  if (url.includes('/apps/bench/')) return '@idem/bench';
  return url ? url.replace(/.*\//, '') : `(${functionName || 'native'})`;
}

export function summarizeProfile(
  profile: Profile,
  functions: readonly string[] = [],
  window?: SampleWindow,
): ProfileSummary {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map<number, number>();
  for (const node of profile.nodes)
    for (const child of node.children ?? []) parents.set(child, node.id);
  const selfTime = new Map<number, number>();
  let total = 0;
  let at = profile.startTime;
  profile.samples.forEach((id, index) => {
    const delta = profile.timeDeltas[index] ?? 0;
    at += delta;
    if (window && (at < window.fromUs || at > window.toUs)) return;
    selfTime.set(id, (selfTime.get(id) ?? 0) + delta);
    total += delta;
  });
  const byPackage = new Map<string, number>();
  const byFunction = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, time] of selfTime) {
    const { functionName, url, lineNumber } = entry(nodes, id, 'profile node').callFrame;
    const pkg = packageOf(url, functionName);
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + time);
    const name = `${functionName || '(anonymous)'} (${pkg}:${lineNumber + 1})`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + time);
    const seen = new Set<string>();
    for (
      let current: number | undefined = id;
      current !== undefined;
      current = parents.get(current)
    ) {
      const frame = entry(nodes, current, 'profile node').callFrame;
      if (!functions.includes(frame.functionName)) continue;
      const key = `${frame.functionName} (${packageOf(frame.url, frame.functionName)})`;
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + time);
    }
  }
  const sorted = (map: Map<string, number>) =>
    [...map].sort((a, b) => b[1] - a[1]).map(([key, time]): [string, number] => [key, time / 1000]);
  return {
    totalMs: total / 1000,
    byPackage: sorted(byPackage),
    byFunction: sorted(byFunction),
    inclusive: sorted(inclusive),
  };
}

export function formatSummary(summary: ProfileSummary, top = 15): string {
  const busy =
    summary.totalMs - (summary.byPackage.find(([name]) => name === '((idle))')?.[1] ?? 0);
  const line = ([name, ms]: [string, number]) =>
    `${((100 * ms) / summary.totalMs).toFixed(1).padStart(5)} %  ${(name.includes('(idle)') ? '' : `${((100 * ms) / busy).toFixed(1)} % of busy`).padStart(14)}  ${name}`;
  return [
    `${(summary.totalMs / 1000).toFixed(1)} s sampled, ${(busy / 1000).toFixed(1)} s busy`,
    '-- self time by package',
    ...summary.byPackage.slice(0, top).map(line),
    '-- self time by function',
    ...summary.byFunction.slice(0, top).map(line),
    ...(summary.inclusive.length > 0 ? ['-- inclusive time', ...summary.inclusive.map(line)] : []),
  ].join('\n');
}

/** The largest `.cpuprofile` in a folder (the main thread's). */
export function mainProfileIn(path: string): string {
  if (!statSync(path).isDirectory()) return path;
  const files = readdirSync(path)
    .filter((file) => file.endsWith('.cpuprofile'))
    .map((file) => join(path, file));
  const [largest] = files.sort((a, b) => statSync(b).size - statSync(a).size);
  if (largest === undefined) throw new Error(`no .cpuprofile in ${path}`);
  return largest;
}

if (process.argv[1]?.endsWith('summarizeProfile.ts')) {
  const [path, names] = process.argv.slice(2);
  if (!path) {
    console.error('usage: summarizeProfile.ts <file.cpuprofile | folder> [functionName,…]');
    process.exit(2);
  }
  const file = mainProfileIn(path);
  console.log(file);
  console.log(
    formatSummary(
      summarizeProfile(JSON.parse(readFileSync(file, 'utf8')) as Profile, names?.split(',') ?? []),
    ),
  );
}
