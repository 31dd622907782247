// Declared here rather than through @types/node: the published build has no Node types,
// and in a browser bundle `process` is whatever the bundler provides.
declare const process: { env: Record<string, string | undefined> };

/**
 * Whether development-time warnings should be printed: everywhere except when
 * `process.env.NODE_ENV` is `'production'`. Written as the exact expression
 * `process.env.NODE_ENV` because that is what bundlers (Next.js, Vite, webpack) replace
 * with a literal, so the warning code drops out of production builds; a runtime without
 * a `process` global (a browser without such a bundler) counts as development.
 */
export function isDevelopment(): boolean {
  try {
    return process.env.NODE_ENV !== 'production';
  } catch {
    return true;
  }
}
