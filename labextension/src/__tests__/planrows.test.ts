import assert from 'node:assert/strict';
import { test } from 'node:test';

import { naturalCompare } from '../plan/model';
import { countsOf, entriesOf, filterRows, moduleOf, rowsOf, rowsText } from '../plan/model';

const plan = {
  summary: 'Plan: 3 to add, 1 to change, 4 to destroy (1 replaced).',
  resources: [
    { address: 'terraform_data.new', action: 'create', type: 'terraform_data', changes: [] },
    { address: 'terraform_data.old[10]', action: 'delete', type: 'terraform_data', changes: [] },
    { address: 'terraform_data.old[2]', action: 'delete', type: 'terraform_data', changes: [] },
    { address: 'module.a[12].aws_s3_bucket.b', action: 'delete', type: 'aws_s3_bucket' },
    { address: 'module.a[3].aws_s3_bucket.b', action: 'delete', type: 'aws_s3_bucket' },
    { address: 'terraform_data.app', action: 'update', type: 'terraform_data', changes: [] },
    {
      address: 'terraform_data.cache',
      action: 'replace',
      type: 'terraform_data',
      changes: [{ path: 'input', before: '(sensitive)', after: '(sensitive)' }]
    },
    { address: 'terraform_data.same', action: 'no-op', type: 'terraform_data' }
  ]
};

test('natural order: numbers in addresses compare as numbers', () => {
  const sorted = ['old[10]', 'old[2]', 'old[1]', 'module.a[12].x', 'module.a[3].x'].sort(
    naturalCompare
  );
  assert.deepEqual(sorted, ['module.a[3].x', 'module.a[12].x', 'old[1]', 'old[2]', 'old[10]']);
});

test('rows: replacements, then deletes (by module, natural order), updates, creates', () => {
  const rows = rowsOf(plan, undefined);
  assert.deepEqual(
    rows.map(r => r.address),
    [
      'terraform_data.cache',
      'terraform_data.old[2]',
      'terraform_data.old[10]',
      'module.a[3].aws_s3_bucket.b',
      'module.a[12].aws_s3_bucket.b',
      'terraform_data.app',
      'terraform_data.new'
    ]
  );
  assert.equal(rows[0].diff?.[0], '~ input: (sensitive) -> (sensitive)');
  assert.equal(moduleOf('module.a[3].module.b["x"].aws_s3_bucket.b[0]', 'aws_s3_bucket'), 'module.a[3].module.b["x"]');
  assert.equal(moduleOf('module.a[3].data.aws_ami.u'), 'module.a[3]');
});

test('the compact rows of the kernel keep its order; groups get headers', () => {
  const compact = {
    v: 1,
    actions: ['replace', 'delete'],
    groups: [['', 'x', 'x.'], ['module.m', 'y', 'module.m.y.']],
    whys: ['', 'tainted'],
    action: [0, 1, 1],
    group: [0, 1, 1],
    name: ['a', 'b[2]', 'b[10]'],
    why: [1, 0, 0],
    diff: ['~ a: 1 -> 2\n~ b: 3 -> 4', null, '']
  };
  const rows = rowsOf({ summary: '', resources: [] }, compact);
  assert.deepEqual(rows.map(r => [r.action, r.module, r.why]), [
    ['replace', '', 'tainted'],
    ['delete', 'module.m', ''],
    ['delete', 'module.m', '']
  ]);
  assert.deepEqual(rows.map(r => r.diff), [['~ a: 1 -> 2', '~ b: 3 -> 4'], null, []]);
  const entries = entriesOf(rows);
  assert.deepEqual(
    entries.map(e => (e.kind === 'group' ? `# ${e.module} ${e.type} ${e.count}` : e.row.address)),
    ['#  x 1', 'x.a', '# module.m y 2', 'module.m.y.b[2]', 'module.m.y.b[10]']
  );
  // A payload whose columns disagree is not read as compact rows.
  assert.equal(rowsOf({ summary: '', resources: [] }, { ...compact, group: [0] }).length, 0);
});

test('filter by action and search by address; copy is one line per row', () => {
  const rows = rowsOf(plan, undefined);
  const deletes = filterRows(rows, new Set(['delete']), '');
  assert.equal(deletes.length, 4);
  assert.deepEqual(
    filterRows(rows, new Set(), 'OLD[').map(r => r.address),
    ['terraform_data.old[2]', 'terraform_data.old[10]']
  );
  assert.equal(
    rowsText(filterRows(rows, new Set(['replace']), '')),
    'replace\tterraform_data.cache'
  );
});

test('a 10,000-row compact payload: every row, a filter per action, search over all', () => {
  const n = 10_000;
  const ranks = (i: number) => (i % 250 === 7 ? 0 : i % 8 === 3 ? 1 : i % 10 === 5 ? 2 : 3);
  const order = [...Array(n).keys()].sort((a, b) => ranks(a) - ranks(b) || a - b);
  const compact = {
    v: 1,
    actions: ['replace', 'delete', 'update', 'create'],
    groups: [['', 'terraform_data', 'terraform_data.']],
    whys: [''],
    action: order.map(ranks),
    group: order.map(() => 0),
    name: order.map(i => `r[${i}]`),
    why: order.map(() => 0),
    diff: order.map(() => null)
  };
  const rows = rowsOf({ summary: '', resources: [] }, compact);
  assert.equal(rows.length, n);
  assert.deepEqual(
    countsOf(rows).map(([action]) => action),
    ['replace', 'delete', 'update', 'create']
  );
  const creates = filterRows(rows, new Set(['create']), '');
  assert.ok(creates.length > 7000 && creates.every(r => r.action === 'create'));
  const last = rows[rows.length - 1].address;
  assert.deepEqual(
    filterRows(rows, new Set(['create']), last).map(r => r.address),
    [last]
  );
});
