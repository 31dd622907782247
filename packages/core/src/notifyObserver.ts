/**
 * Hands `event` to an observer (`onEvent`, a metrics hook), if there is one. Whatever the
 * observer throws is swallowed: observability must never change the outcome of a write,
 * nor a retry decision, nor a delivery.
 */
export function notifyObserver<TEvent>(
  observer: ((event: TEvent) => void) | undefined,
  event: TEvent,
): void {
  if (!observer) return;
  try {
    observer(event);
  } catch {
    // Swallowed on purpose: see above.
  }
}
