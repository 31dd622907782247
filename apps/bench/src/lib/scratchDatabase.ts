import {
  createScratchDatabase as createDatabase,
  type ScratchDatabase,
} from '@idem/server/testing';
import { onCleanup } from './cleanup.js';
import { ADMIN_DATABASE_URL } from './config.js';

export type { ScratchDatabase };

/**
 * A uniquely named, empty database on the server at `ADMIN_DATABASE_URL`, dropped on
 * `drop()` and also on failure and Ctrl-C.
 */
export async function createScratchDatabase(prefix = 'idem_bench'): Promise<ScratchDatabase> {
  const scratch = await createDatabase({ serverUrl: ADMIN_DATABASE_URL, prefix });
  const drop = onCleanup(`drop database ${scratch.name}`, scratch.drop);
  return { ...scratch, drop };
}
