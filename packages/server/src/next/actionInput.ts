import { InvalidKeyError, validateKey } from '@idem/core';

/**
 * The name of the hidden form field that carries a Server Action's idempotency key, as the
 * `Idempotency-Key` header carries a request's.
 */
export const IDEMPOTENCY_KEY_FIELD = 'idempotency-key';

/** The props of the hidden input that carries a form's key; see {@link idempotencyKeyField}. */
export interface IdempotencyKeyFieldProps {
  type: 'hidden';
  name: typeof IDEMPOTENCY_KEY_FIELD;
  value: string;
}

/**
 * The hidden input that gives a form its idempotency key, rendered on the server with the
 * form: `<input {...idempotencyKeyField()} />`. Every submission of that rendered form
 * carries the same key, with or without JavaScript: a double click, Enter pressed twice,
 * the browser's "resend" of the POST, Back and submit again. A page rendered anew gets a
 * new key (a new intent). Pass a key the server chose (an order or checkout id) to make
 * every page of that intent, in any tab, share one.
 *
 * Render it in a Server Component or in the server render of a client component: a key
 * made during a client render would change on every render.
 */
export function idempotencyKeyField(key: string = crypto.randomUUID()): IdempotencyKeyFieldProps {
  return { type: 'hidden', name: IDEMPOTENCY_KEY_FIELD, value: validateKey(key) };
}

/** The last `FormData` among an action's arguments (`useActionState` passes it second). */
export function formDataOf(args: readonly unknown[]): FormData | undefined {
  for (let index = args.length - 1; index >= 0; index--) {
    const arg = args[index];
    if (arg instanceof FormData) return arg;
  }
  return undefined;
}

/**
 * The key in the form's `idempotency-key` field, validated, or `undefined` without one. A
 * field given twice with two values, or a file, is refused: which submission is meant
 * cannot be told.
 */
export function formKeyOf(form: FormData | undefined): string | undefined {
  if (!form) return undefined;
  const values = form.getAll(IDEMPOTENCY_KEY_FIELD);
  if (values.length === 0) return undefined;
  const [first] = values;
  if (typeof first !== 'string' || values.some((value) => value !== first)) {
    throw new InvalidKeyError(
      'malformed_header',
      `The form's "${IDEMPOTENCY_KEY_FIELD}" field holds ${typeof first === 'string' ? 'more than one key' : 'a file'}: ` +
        'render one idempotencyKeyField() per form.',
    );
  }
  return validateKey(first);
}

/** Fields React adds to a form posted before (or without) JavaScript: not the user's input. */
const isFrameworkField = (name: string) => name.startsWith('$ACTION_');

/**
 * What the default fingerprint covers: the form's fields without its key (sorted by name,
 * order kept within a name; a file by its name, type, size and SHA-256), or, for an action
 * called without a form, all of its arguments.
 */
export async function defaultActionInput(args: readonly unknown[]): Promise<unknown> {
  const form = formDataOf(args);
  if (!form) return { args };
  const fields: [string, unknown][] = [];
  for (const [name, value] of form.entries()) {
    if (name === IDEMPOTENCY_KEY_FIELD || isFrameworkField(name)) continue;
    fields.push([name, typeof value === 'string' ? value : await fileFingerprint(value)]);
  }
  fields.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return { form: fields };
}

async function fileFingerprint(file: File): Promise<unknown> {
  const digest = await crypto.subtle.digest('SHA-256', await file.arrayBuffer());
  const sha256 = Buffer.from(digest).toString('hex');
  return { file: { name: file.name, type: file.type, size: file.size, sha256 } };
}
