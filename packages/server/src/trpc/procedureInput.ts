import { type AnyTRPCMiddlewareFunction, initTRPC, TRPCError } from '@trpc/server';
import type { IdempotencyRequest } from './idempotencyContext.js';

type MiddlewareOptions = Parameters<AnyTRPCMiddlewareFunction>[0];
type Validate = (rawInput: unknown) => Promise<unknown>;

/** One validator per procedure (per input-parser list), built on first use. */
const validators = new WeakMap<readonly unknown[], Validate>();

/**
 * The call's input as the client sent it, once it is certain that the procedure would
 * run with it: a call whose body cannot be read, or whose input its parsers refuse, never
 * reaches the procedure, so it must not reach the store either (a Stripe rule: nothing is
 * saved for a request that failed validation). Such a call is answered here with the very
 * `BAD_REQUEST` tRPC would have answered, before anything is claimed, and its key stays
 * free for the corrected request.
 *
 * The middleware usually sits before `.input()`, where tRPC has not parsed the input yet,
 * so the procedure's own parsers (`info.calls[i].procedure._def.inputs`, public in tRPC's
 * request info) are run here as tRPC runs them: a zod-style schema's `parseAsync` and a
 * validator function are called directly, each on the raw input, and any other kind goes
 * through a tRPC procedure of its own, so that tRPC's rules for every validator kind and
 * for several `.input()`s apply unchanged. After `.input()` tRPC has already parsed it (a
 * failure never got here), and nothing runs twice.
 *
 * Returns `{ input }`, with `input` `undefined` for a procedure without input parsers:
 * such a procedure never reads the body (httpLink sends none for a mutation without
 * input), so it runs, and is fingerprinted, as a call without input.
 */
export async function procedureInput(
  opts: MiddlewareOptions,
  request: IdempotencyRequest,
): Promise<{ input: unknown }> {
  const parsers = request.inputParsersOf?.(opts.batchIndex);
  let input: unknown;
  try {
    input = await opts.getRawInput();
  } catch (error) {
    if (!isUnreadableInput(error)) throw error;
    if (error.cause instanceof RangeError) {
      // The transformer recursed past the call stack: say what is wrong with the request.
      throw new TRPCError({
        code: 'BAD_REQUEST',
        message:
          `The input of "${opts.path}" is nested too deeply to read (it overflowed the call ` +
          'stack); it was not run or stored. Send flatter input.',
        cause: error,
      });
    }
    // Without tRPC's request info the procedure is unknown: refusing is the safe side, as
    // running it would be unprotected and fingerprinting the failure would store it.
    if (parsers !== undefined && parsers.length === 0) return { input: undefined };
    throw error;
  }
  const parsedAlready = opts.input !== undefined;
  if (parsers !== undefined && parsers.length > 0 && !parsedAlready) {
    await validatorFor(parsers)(input);
  }
  return { input };
}

/** tRPC reports an unreadable body as BAD_REQUEST (some versions: PARSE_ERROR). */
function isUnreadableInput(error: unknown): error is TRPCError {
  return (
    error instanceof TRPCError && (error.code === 'BAD_REQUEST' || error.code === 'PARSE_ERROR')
  );
}

function validatorFor(parsers: readonly unknown[]): Validate {
  let validate = validators.get(parsers);
  if (!validate) {
    const direct = parsers.map(directParseOf);
    validate = direct.every((parse) => parse !== undefined)
      ? directValidator(direct as ((rawInput: unknown) => unknown)[])
      : callerValidator(parsers);
    validators.set(parsers, validate);
  }
  return validate;
}

/**
 * How tRPC parses with `parser`, for the two kinds it calls directly: a zod-style schema
 * object (`parser.parseAsync(input)`) and a plain validator function (`parser(input)`).
 * `undefined` for any other kind, which goes through a tRPC procedure instead.
 */
function directParseOf(parser: unknown): ((rawInput: unknown) => unknown) | undefined {
  if (typeof parser === 'object' && parser !== null) {
    const schema = parser as { parseAsync?: unknown };
    if (typeof schema.parseAsync !== 'function') return undefined;
    return (rawInput) => (schema.parseAsync as (input: unknown) => unknown).call(schema, rawInput);
  }
  if (typeof parser === 'function' && !('~standard' in parser)) {
    if (typeof (parser as { assert?: unknown }).assert === 'function') return undefined;
    return parser as (rawInput: unknown) => unknown;
  }
  return undefined;
}

/**
 * tRPC's input step for these parsers, without a procedure call around it: every parser
 * sees the raw input, in order, and the first refusal is tRPC's `BAD_REQUEST` with the
 * parser's error as its cause.
 */
function directValidator(parses: readonly ((rawInput: unknown) => unknown)[]): Validate {
  return async (rawInput) => {
    for (const parse of parses) {
      try {
        await parse(rawInput);
      } catch (cause) {
        throw new TRPCError({ code: 'BAD_REQUEST', cause });
      }
    }
    return undefined;
  };
}

/** The parsers run by a tRPC procedure of their own: tRPC's rules for any validator kind. */
function callerValidator(parsers: readonly unknown[]): Validate {
  const t = initTRPC.create();
  // biome-ignore lint/suspicious/noExplicitAny: any parser tRPC accepted for the procedure
  let builder: any = t.procedure;
  for (const parser of parsers) builder = builder.input(parser);
  const router = t.router({ validate: builder.mutation(() => null) });
  const caller = t.createCallerFactory(router)({}) as unknown as { validate: Validate };
  return (rawInput) => caller.validate(rawInput);
}
