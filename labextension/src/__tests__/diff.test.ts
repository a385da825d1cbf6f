import assert from 'node:assert/strict';
import { test } from 'node:test';

import { diffLines, hunkHeader, splitLines, toHunks } from '../cards/diff';

/** Rebuild both sides from the ops: every diff must reproduce its inputs. */
function sides(oldText: string | null, newText: string): { before: string[]; after: string[] } {
  const result = diffLines(oldText, newText);
  return {
    before: result.ops.filter(op => op.type !== 'insert').map(op => op.text),
    after: result.ops.filter(op => op.type !== 'delete').map(op => op.text)
  };
}

test('splitLines treats a final newline as a terminator', () => {
  assert.deepEqual(splitLines('a\nb\n'), { lines: ['a', 'b'], missingEol: false });
  assert.deepEqual(splitLines('a\nb'), { lines: ['a', 'b'], missingEol: true });
  assert.deepEqual(splitLines(''), { lines: [], missingEol: false });
  assert.deepEqual(splitLines('\n'), { lines: [''], missingEol: false });
});

test('a one-line change in the middle is one delete and one insert', () => {
  const result = diffLines('a\nb\nc\n', 'a\nB\nc\n');
  assert.deepEqual(
    result.ops.map(op => `${op.type}:${op.text}`),
    ['equal:a', 'delete:b', 'insert:B', 'equal:c']
  );
  assert.equal(result.added, 1);
  assert.equal(result.removed, 1);
  assert.ok(result.exact);
});

test('line numbers follow each side', () => {
  const result = diffLines('x\ny\n', 'w\nx\ny\nz\n');
  assert.deepEqual(
    result.ops.map(op => [op.type, op.oldLine, op.newLine]),
    [
      ['insert', null, 1],
      ['equal', 1, 2],
      ['equal', 2, 3],
      ['insert', null, 4]
    ]
  );
});

test('a new file is all insertions', () => {
  const result = diffLines(null, 'resource "x" "y" {}\n');
  assert.equal(result.added, 1);
  assert.equal(result.removed, 0);
  const [hunk] = toHunks(result.ops);
  assert.equal(hunkHeader(hunk), '@@ -0,0 +1 @@');
});

test('the diff is minimal on an interleaved edit', () => {
  // Classic Myers example: ABCABBA -> CBABAC has edit distance 5.
  const oldText = 'A\nB\nC\nA\nB\nB\nA\n';
  const newText = 'C\nB\nA\nB\nA\nC\n';
  const result = diffLines(oldText, newText);
  assert.equal(result.added + result.removed, 5);
  const { before, after } = sides(oldText, newText);
  assert.deepEqual(before, splitLines(oldText).lines);
  assert.deepEqual(after, splitLines(newText).lines);
});

test('random edits always reproduce both texts', () => {
  let seed = 42;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  for (let round = 0; round < 200; round++) {
    const base = Array.from({ length: rand(30) }, () => `l${rand(6)}`);
    const edited = base.filter(() => rand(4) !== 0);
    for (let i = 0; i < rand(5); i++) {
      edited.splice(rand(edited.length + 1), 0, `n${rand(6)}`);
    }
    const oldText = base.join('\n') + '\n';
    const newText = edited.join('\n') + '\n';
    const { before, after } = sides(oldText, newText);
    assert.deepEqual(before, splitLines(oldText).lines, `round ${round}`);
    assert.deepEqual(after, splitLines(newText).lines, `round ${round}`);
  }
});

test('past the edit limit the middle becomes one replaced block', () => {
  const oldText = Array.from({ length: 50 }, (_, i) => `old${i}`).join('\n') + '\n';
  const newText = Array.from({ length: 50 }, (_, i) => `new${i}`).join('\n') + '\n';
  const result = diffLines('keep\n' + oldText, 'keep\n' + newText, 10);
  assert.equal(result.exact, false);
  assert.equal(result.removed, 50);
  assert.equal(result.added, 50);
  assert.equal(result.ops[0].type, 'equal');
});

test('a missing final newline counts as a change', () => {
  const result = diffLines('a\nb', 'a\nb\n');
  assert.equal(result.removed, 1);
  assert.equal(result.added, 1);
  assert.equal(result.oldMissingEol, true);
  assert.equal(result.newMissingEol, false);
});

test('identical texts have no hunks', () => {
  const result = diffLines('same\n', 'same\n');
  assert.equal(result.added + result.removed, 0);
  assert.deepEqual(toHunks(result.ops), []);
});

test('distant changes make separate hunks with 3 lines of context', () => {
  const lines = Array.from({ length: 30 }, (_, i) => `line${i + 1}`);
  const edited = [...lines];
  edited[1] = 'changed2';
  edited[25] = 'changed26';
  const result = diffLines(lines.join('\n') + '\n', edited.join('\n') + '\n');
  const hunks = toHunks(result.ops);
  assert.equal(hunks.length, 2);
  assert.equal(hunkHeader(hunks[0]), '@@ -1,5 +1,5 @@');
  assert.equal(hunkHeader(hunks[1]), '@@ -23,7 +23,7 @@');
});

test('close changes share a hunk', () => {
  const lines = Array.from({ length: 20 }, (_, i) => `line${i + 1}`);
  const edited = [...lines];
  edited[5] = 'x';
  edited[11] = 'y';
  const hunks = toHunks(diffLines(lines.join('\n'), edited.join('\n')).ops);
  assert.equal(hunks.length, 1);
});
