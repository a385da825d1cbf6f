import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DeltaText, parseDelta } from '../cards/deltatext';

test('deltas at the end are appended; offsets count code points', () => {
  const text = new DeltaText();
  text.apply({ kind: 'text', offset: 0, text: 'Plan 🚀 ' });
  text.apply({ kind: 'text', offset: 7, text: 'ready.' });
  assert.equal(text.text, 'Plan 🚀 ready.');
  assert.equal(text.points, 13);
  assert.equal(text.gap, false);
});

test('a repeated delta replaces what follows its offset', () => {
  const text = new DeltaText();
  text.apply({ kind: 'text', offset: 0, text: 'abc' });
  text.apply({ kind: 'text', offset: 3, text: 'def' });
  text.apply({ kind: 'text', offset: 3, text: 'def' });
  assert.equal(text.text, 'abcdef');
  assert.equal(text.points, 6);
});

test('a delta past the end marks a gap and keeps both parts', () => {
  const text = new DeltaText();
  text.apply({ kind: 'text', offset: 40, text: 'tail' });
  assert.equal(text.gap, true);
  assert.equal(text.text, 'tail');
  text.apply({ kind: 'text', offset: 44, text: ' more' });
  assert.equal(text.text, 'tail more');
});

test('bad payloads are null, never exceptions', () => {
  for (const bad of [null, 'x', [], { text: 3, offset: 0 }, { text: 'a', offset: -1 }, { text: 'a', offset: 1.5 }, { text: 'a' }]) {
    assert.equal(parseDelta(bad), null);
  }
  assert.deepEqual(parseDelta({ v: 1, kind: 'thinking', offset: 2, text: 'x' }), {
    kind: 'thinking',
    offset: 2,
    text: 'x'
  });
  assert.equal(parseDelta({ kind: 'weird', offset: 0, text: '' })?.kind, 'text');
  // The kernel sends only the offset and the text for text (kind for thinking only).
  assert.deepEqual(parseDelta({ offset: 0, text: 'Hi' }), { kind: 'text', offset: 0, text: 'Hi' });
});
