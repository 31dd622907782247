import { ConfigurationError, isConfigurationError } from '@idem/core';
import { describe, expect, it } from 'vitest';
import { missingTablesError } from './missingTablesError.js';

/** A driver's error with a SQLSTATE, wrapped as Drizzle wraps it. */
const wrapped = (code: string, message: string) =>
  new Error('Failed query: select 1 from "idem_keys"', {
    cause: Object.assign(new Error(message), { code }),
  });

describe('missingTablesError', () => {
  it('names migrate(db) for 42P01 on any idem table, schema-qualified or not, down the cause chain', () => {
    for (const relation of ['idem_keys', 'idem_outbox', 'idem_inbox', 'app.idem_keys']) {
      const cause = wrapped('42P01', `relation "${relation}" does not exist`);
      const error = missingTablesError(cause, 'enqueue() wrote nothing');
      expect(isConfigurationError(error)).toBe(true);
      expect(error?.message).toMatch(
        /^enqueue\(\) wrote nothing: .*`migrate\(db\)` from `@idem\/server\/postgres`/,
      );
      expect(error?.message).not.toContain(relation);
      expect(error?.cause).toBe(cause);
    }
  });

  it('names migrate(db) for 42703 on a column of an idem table: tables from an older version', () => {
    for (const message of [
      'column "steps" of relation "idem_keys" does not exist',
      'column idem_keys.steps does not exist',
      'column app.idem_outbox.headers does not exist',
    ]) {
      const cause = wrapped('42703', message);
      const error = missingTablesError(cause, 'This call was not run');
      expect(isConfigurationError(error)).toBe(true);
      expect(error?.message).toMatch(
        /^This call was not run: idem's tables in this database are older than this version of idem .*`migrate\(db\)`/,
      );
      expect(error?.message).not.toContain('steps');
      expect(error?.cause).toBe(cause);
    }
    // A read from one table names the column alone: idem's, when the statement was idem's.
    const unnamed = wrapped('42703', 'column "steps" does not exist');
    expect(missingTablesError(unnamed, 'x', true)?.message).toMatch(/older than this version/);
    expect(missingTablesError(unnamed, 'x')).toBeUndefined();
  });

  it('leaves the app’s own tables, other SQLSTATEs and idem’s own errors alone', () => {
    expect(
      missingTablesError(wrapped('42P01', 'relation "orders" does not exist'), 'x'),
    ).toBeUndefined();
    expect(
      missingTablesError(
        wrapped('42703', 'column "total" of relation "orders" does not exist'),
        'x',
      ),
    ).toBeUndefined();
    expect(
      missingTablesError(wrapped('42703', 'column "steps" does not exist'), 'x'),
    ).toBeUndefined();
    expect(missingTablesError(wrapped('08006', 'connection failure'), 'x')).toBeUndefined();
    const already = new ConfigurationError('told', {
      cause: wrapped('42P01', 'relation "idem_keys" does not exist'),
    });
    expect(missingTablesError(already, 'x')).toBeUndefined();
    expect(missingTablesError(undefined, 'x')).toBeUndefined();
    expect(missingTablesError('relation "idem_keys" does not exist', 'x')).toBeUndefined();
  });
});
