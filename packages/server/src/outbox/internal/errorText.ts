/** What is stored in `last_error`: the message (and the cause's), bounded in size. */
export function errorText(error: unknown, maxLength = 2_000): string {
  let text = describe(error);
  const cause = error instanceof Error ? error.cause : undefined;
  if (cause !== undefined) text += ` (cause: ${describe(cause)})`;
  // Postgres text cannot hold U+0000.
  text = text.replaceAll('\u0000', '\ufffd');
  return text.length > maxLength ? `${text.slice(0, maxLength - 1)}…` : text;
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  try {
    return String(error);
  } catch {
    return 'unprintable error';
  }
}
