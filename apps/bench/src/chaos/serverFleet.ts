import { type Child, startChild } from '../lib/child.js';
import { required } from '../lib/required.js';

export interface Crash {
  server: string;
  /** The first line of the uncaught error the process printed, if any. */
  reason: string;
  at: number;
}

export interface Probe {
  server: string;
  ok: boolean;
  /** The process that answered. */
  pid: number | undefined;
  detail: string;
}

export interface FleetOptions {
  module: string;
  count: number;
  env: Record<string, string>;
  /** The delay before a dead server is started again, drawn per restart. */
  restartAfterMs: () => number;
  log: (message: string) => void;
}

interface Slot {
  id: string;
  port: number;
  child: Child | undefined;
  /** The exit that is coming was ours (SIGKILL), not a crash. */
  killing: boolean;
  restarting: Promise<void> | undefined;
}

/**
 * The app servers of the soak, supervised like a process manager would: every server that
 * exits (our SIGKILL, or a crash of its own) is started again on the same port after a
 * short delay. Kills and crashes are counted apart.
 */
export async function startFleet(options: FleetOptions) {
  const slots: Slot[] = [];
  const crashes: Crash[] = [];
  let kills = 0;
  let stopping = false;

  const launch = async (slot: Slot): Promise<void> => {
    const child = await startChild(options.module, {
      env: { ...options.env, PORT: String(slot.port), SERVER_ID: slot.id },
      stdio: 'tail',
    });
    slot.port = Number(child.ready.port);
    slot.child = child;
    void child.exited.then((status) => {
      if (slot.child !== child) return;
      slot.child = undefined;
      if (slot.killing) {
        slot.killing = false;
      } else if (!stopping) {
        const reason = /^\w*Error[^\n]*/m.exec(child.stderrTail())?.[0] ?? `exit ${String(status)}`;
        crashes.push({ server: slot.id, reason, at: Date.now() });
        options.log(`${slot.id} CRASHED by itself (${reason})`);
      }
      if (!stopping) restart(slot);
    });
  };

  const restart = (slot: Slot) => {
    slot.restarting = (async () => {
      await new Promise((resolve) => setTimeout(resolve, options.restartAfterMs()));
      for (let attempt = 1; !stopping; attempt++) {
        try {
          await launch(slot);
          options.log(`restarted ${slot.id}`);
          return;
        } catch (error) {
          options.log(`restart of ${slot.id} failed (attempt ${attempt}): ${String(error)}`);
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
      }
    })().finally(() => {
      slot.restarting = undefined;
    });
  };

  for (let index = 0; index < options.count; index++) {
    const slot: Slot = {
      id: `s${index + 1}`,
      port: 0,
      child: undefined,
      killing: false,
      restarting: undefined,
    };
    slots.push(slot);
    await launch(slot);
  }

  return {
    crashes,
    get kills() {
      return kills;
    },
    /** Ports of the servers that are up now. */
    ports: () => slots.filter((slot) => slot.child).map((slot) => slot.port),
    /** SIGKILLs one of the servers that are up, never the last one; returns its id. */
    async killOne(random: () => number): Promise<string | undefined> {
      const up = slots.flatMap((slot) =>
        slot.child && !slot.killing ? [{ slot, child: slot.child }] : [],
      );
      if (up.length < 2) return undefined;
      const { slot: victim, child } = required(
        up[Math.floor(random() * up.length)],
        'the server random() drew',
      );
      victim.killing = true;
      child.kill('SIGKILL');
      await child.exited;
      kills++;
      return victim.id;
    },
    /** Waits until every server is up again. */
    async allUp(): Promise<void> {
      while (slots.some((slot) => !slot.child)) {
        await Promise.all(slots.map((slot) => slot.restarting));
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    /** The process id of every server that is up, by server id. */
    pids: () =>
      new Map(slots.flatMap((slot) => (slot.child ? [[slot.id, slot.child.pid] as const] : []))),
    /**
     * Asks each server that is up for `health` directly (not through the proxy): it answers
     * only if its pool can reach the database, i.e. reconnected after a restart.
     */
    async probe(): Promise<Probe[]> {
      return Promise.all(
        slots
          .filter((slot) => slot.child)
          .map(async (slot): Promise<Probe> => {
            try {
              const response = await fetch(`http://127.0.0.1:${slot.port}/health`, {
                signal: AbortSignal.timeout(10_000),
                headers: { 'x-tenant': 'chaos' },
              });
              const body = (await response.json()) as {
                result?: { data?: { json?: { pid?: number } } };
              };
              const pid = body.result?.data?.json?.pid;
              return { server: slot.id, ok: response.ok, pid, detail: `HTTP ${response.status}` };
            } catch (error) {
              return { server: slot.id, ok: false, pid: undefined, detail: String(error) };
            }
          }),
      );
    },
    async stop(): Promise<void> {
      stopping = true;
      await Promise.all(slots.map((slot) => slot.restarting));
      await Promise.all(slots.map((slot) => slot.child?.stop()));
    },
  };
}
