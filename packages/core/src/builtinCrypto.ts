/** The part of `node:crypto` idem uses. */
export interface BuiltinCrypto {
  createHash(algorithm: 'sha256'): {
    update(data: string, encoding: 'utf8'): { digest(encoding: 'hex'): string };
  };
  /** The one-shot digest (Node ≥ 20.12): the same hash without building a `Hash` object. */
  hash?(algorithm: 'sha256', data: string, outputEncoding: 'hex'): string;
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

/**
 * Lowercase hex SHA-256 of the UTF-8 bytes of `text` with `node:crypto`, or `undefined`
 * where the runtime has none. `crypto.hash` where it exists: building a `Hash` object costs
 * several times what hashing a request's few hundred bytes does.
 */
export const builtinSha256Hex: ((text: string) => string) | undefined = (() => {
  const crypto = builtinCrypto;
  if (!crypto) return undefined;
  const { hash } = crypto;
  if (typeof hash === 'function') return (text: string) => hash('sha256', text, 'hex');
  return (text: string) => crypto.createHash('sha256').update(text, 'utf8').digest('hex');
})();
