/**
 * Everything a run creates outside itself (scratch databases, child processes, NATS
 * streams) registers its undo here, so that a failure, Ctrl-C or SIGTERM still drops and
 * kills what the run made. Undos run newest first, each at most once.
 */
type Undo = () => Promise<void> | void;

const undos = new Map<number, { name: string; undo: Undo }>();
let nextId = 0;
let running: Promise<void> | undefined;

/** Registers `undo`; the returned function runs it now and forgets it. */
export function onCleanup(name: string, undo: Undo): () => Promise<void> {
  const id = nextId++;
  undos.set(id, { name, undo });
  return async () => {
    const entry = undos.get(id);
    if (!entry) return;
    undos.delete(id);
    await entry.undo();
  };
}

/** Runs every registered undo, newest first; a failing undo is reported, not fatal. */
export function runCleanups(): Promise<void> {
  running ??= (async () => {
    const entries = [...undos.entries()].reverse();
    undos.clear();
    for (const [, { name, undo }] of entries) {
      try {
        await undo();
      } catch (error) {
        console.error(
          `cleanup "${name}" failed: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    }
  })().finally(() => {
    running = undefined;
  });
  return running;
}

/**
 * Runs `main`, then the cleanups, and exits with its status: 0, `main`'s number, or 1 on
 * an exception. SIGINT/SIGTERM clean up and exit 130/143.
 */
export function runMain(main: () => Promise<number>): void {
  let exiting = false;
  const exitAfterCleanup = (code: number) => {
    if (exiting) return;
    exiting = true;
    void runCleanups().finally(() => process.exit(code));
  };
  process.once('SIGINT', () => {
    console.error('\ninterrupted: cleaning up');
    exitAfterCleanup(130);
  });
  process.once('SIGTERM', () => exitAfterCleanup(143));
  main().then(
    (code) => exitAfterCleanup(code),
    (error: unknown) => {
      console.error(error);
      exitAfterCleanup(1);
    },
  );
}
