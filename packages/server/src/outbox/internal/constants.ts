/** The LISTEN/NOTIFY channel that `enqueue` signals and relays listen on. */
export const OUTBOX_CHANNEL = 'idem_outbox';

/**
 * The first key of the two-key advisory locks that serialise producers of one aggregate:
 * "idem" in ASCII. The two-int form keeps these apart from the app's one-bigint locks.
 */
export const AGGREGATE_LOCK_NAMESPACE = 0x6964656d;
