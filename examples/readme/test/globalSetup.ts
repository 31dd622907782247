import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildPackages, packPackages, type Tarballs } from './outsideInstall.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A fresh folder under the OS temp dir, outside the workspace, for throwaway projects. */
    outsideDir: string;
    /** The packed packages, by name. */
    tarballs: Tarballs;
  }
}

/**
 * Packs the packages once for every test file that installs them outside the workspace.
 * Under turbo the packages were built as this task's dependencies (`^build`); run directly,
 * a stale `dist` would be packed, so it builds them first.
 */
export default async function setup(project: TestProject) {
  if (!process.env.TURBO_HASH) await buildPackages();
  const outsideDir = mkdtempSync(join(tmpdir(), 'idem-readme-'));
  project.provide('outsideDir', outsideDir);
  project.provide('tarballs', await packPackages(join(outsideDir, 'tarballs')));
  return () => rmSync(outsideDir, { recursive: true, force: true });
}
