import assert from 'node:assert/strict';
import { test } from 'node:test';

import { changeLine, moreNote, parsePlan, rowsOf } from '../plan/model';

const plan = {
  summary: 'Plan: 2 to add, 1 to change, 2 to destroy (1 replaced).',
  resources: [
    { address: 'terraform_data.app', action: 'update', changes: [] },
    { address: 'terraform_data.new', action: 'create', changes: [] },
    { address: 'terraform_data.db', action: 'no-op', changes: [] },
    {
      address: 'terraform_data.cache',
      action: 'replace',
      replace_paths: ['triggers_replace'],
      changes: [
        { path: 'triggers_replace[0]', before: 'small', after: 'large', forces_replace: true }
      ]
    },
    { address: 'terraform_data.old', action: 'delete', changes: [] }
  ]
};

test('a plan payload parses; a broken one says why', () => {
  const parsed = parsePlan({ version: 1, plan });
  assert.ok(parsed.ok);
  assert.deepEqual(parsePlan({ version: 1 }), { ok: false, error: 'no "plan" object' });
  assert.equal(parsePlan(null).ok, false);
});

test('rows: replacements and deletes first, then updates, creates; no-ops left out', () => {
  const rows = rowsOf(plan, undefined);
  assert.deepEqual(
    rows.map(r => r.action),
    ['replace', 'delete', 'update', 'create']
  );
});

test('attribute changes read like terraform, sensitive values stay masked', () => {
  const cache = plan.resources[3];
  assert.equal(
    changeLine(cache, cache.changes[0]),
    '~ triggers_replace[0]: "small" -> "large"  # forces replacement'
  );
  const db = { address: 'terraform_data.db', action: 'update' };
  const secret = { path: 'input', before: '(sensitive)', after: '(sensitive)' };
  assert.equal(changeLine(db, secret), '~ input: (sensitive) -> (sensitive)');
});

test('a bounded plan says how many rows it leaves out', () => {
  assert.equal(moreNote(plan), '');
  const bounded = { ...plan, rows_total: 10000, truncated: true };
  assert.match(moreNote(bounded), /^Showing 4 of 10000 changing resources/);
});
