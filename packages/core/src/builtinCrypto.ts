/** The part of `node:crypto` idem uses. */
export interface BuiltinCrypto {
  createHash(algorithm: 'sha256'): {
    update(data: string, encoding: 'utf8'): { digest(encoding: 'hex'): string };
  };
}

/**
 * `node:crypto` when the runtime has it (Node ≥ 20.16, Deno, Bun), else `undefined`
 * (browsers, edge runtimes, older Node). Looked up through `process.getBuiltinModule`
 * rather than imported, so core keeps no runtime dependency, bundlers for the browser never
 * see the module, and the hash is synchronous: Web Crypto's `digest` is an asynchronous job
 * on a worker thread, which costs a request more than the hash itself.
 */
export const builtinCrypto: BuiltinCrypto | undefined = (() => {
  try {
    const process = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } })
      .process;
    const crypto = process?.getBuiltinModule?.('node:crypto') as BuiltinCrypto | undefined;
    return typeof crypto?.createHash === 'function' ? crypto : undefined;
  } catch {
    return undefined;
  }
})();
