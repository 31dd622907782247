/**
 * The input parsers of a tRPC procedure (its `.input()`s, in order), or `undefined` when
 * the request does not name the procedure.
 *
 * tRPC keeps them in `procedure._def.inputs`, which its `Procedure` type declares and
 * documents ("The input parsers for the procedure") but offers no other way to reach. This
 * is the one place idem reads a dependency's `_def`, and only for this: a procedure's own
 * validation must run before its key is claimed, or an input the procedure refuses would be
 * stored as the key's answer (a request that never reached the procedure must store
 * nothing). `@trpc/server` is pinned to 11.x, and `trpcInput.int.test.ts` fails if tRPC moves them.
 */
export function inputParsersOf(
  procedure: object | null | undefined,
): readonly unknown[] | undefined {
  if (!procedure || !('_def' in procedure)) return undefined; // internal-api: see above
  const definition = procedure._def as { inputs?: unknown }; // internal-api: see above
  return Array.isArray(definition.inputs) ? definition.inputs : undefined;
}
