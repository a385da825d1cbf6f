import assert from 'node:assert/strict';
import { test } from 'node:test';

import { countLines, formatCount, formatElapsed, hiddenNote } from '../cards/format';
import { parseSessionInfo, parseToolCall } from '../cards/payload';
import type { ToolCallPayload } from '../schema';
import { CARDS } from './fixtures';

/** The cut output without the kernel's note, count and range: each test adds what it reads. */
const base: Partial<ToolCallPayload> = { ...CARDS.cutOutput };
delete base.outputNote;
delete base.outputLines;
delete base.hidden;

function parsed(extra: Record<string, unknown>) {
  const result = parseToolCall({ ...base, ...extra });
  assert.ok(result.ok);
  return result.ok ? result.value : (undefined as never);
}

test('the hidden note names the hidden lines and says the agent saw all of it', () => {
  const call = parsed({ outputLines: 4939, hidden: { fromLine: 81, toLine: 4919 } });
  assert.equal(hiddenNote(call), 'lines 81–4,919 of 4,939 hidden; the agent saw all of it');
  assert.doesNotMatch(hiddenNote(call) ?? '', /model saw the same/);
});

test('one hidden line is "line N"; no count without outputLines', () => {
  const call = parsed({ hidden: { fromLine: 61, toLine: 61 } });
  assert.equal(hiddenNote(call), 'line 61 hidden; the agent saw all of it');
});

test('a character cut uses the kernel note; an uncut output has no note', () => {
  const cut = parsed({ outputNote: '1,200 of 9,000 characters hidden; the agent saw all of it' });
  assert.equal(hiddenNote(cut), '1,200 of 9,000 characters hidden; the agent saw all of it');
  assert.equal(hiddenNote(parsed({ outputTruncated: false })), null);
  // A bad range is ignored, not trusted.
  assert.equal(parsed({ hidden: { fromLine: 9, toLine: 2 } }).hidden, null);
});

test('line counts match an editor: a final newline ends a line', () => {
  assert.equal(countLines(''), 0);
  assert.equal(countLines('a'), 1);
  assert.equal(countLines('a\n'), 1);
  assert.equal(countLines('a\nb\n'), 2);
  assert.equal(countLines('a\nb'), 2);
  assert.equal(countLines('\n'), 1);
});

test('counts and durations read well', () => {
  assert.equal(formatCount(4919), '4,919');
  assert.equal(formatCount(1234567), '1,234,567');
  assert.equal(formatCount(81), '81');
  assert.equal(formatElapsed(0.42), '0.4 s');
  assert.equal(formatElapsed(12.7), '12 s');
  assert.equal(formatElapsed(185), '3 min 05 s');
});

test('new card fields parse; junk in them is dropped', () => {
  const call = parsed({
    outputHead: 'head\n',
    outputTail: 'tail\n',
    live: true,
    elapsed: 3.5,
    startedAt: 1_700_000_000,
    question: {
      id: 'q1',
      state: 'pending',
      danger: true,
      reason: 'It changes real infrastructure.',
      options: ['allow_once', 'reject_once', 7],
      answer: null,
      note: null
    }
  });
  assert.equal(call.outputHead, 'head\n');
  assert.equal(call.live, true);
  assert.equal(call.elapsed, 3.5);
  assert.deepEqual(call.question?.options, ['allow_once', 'reject_once']);
  assert.equal(call.question?.danger, true);
  const junk = parsed({ question: 'yes', elapsed: 'soon', hidden: [1, 2] });
  assert.equal(junk.question, null);
  assert.equal(junk.elapsed, null);
  assert.equal(junk.hidden, null);
});

test('session info without a session id is fine when model or mode is known', () => {
  const early = parseSessionInfo({ version: 1, sessionId: null, model: 'scripted', mode: 'bypass' });
  assert.ok(early.ok);
  if (early.ok) {
    assert.equal(early.value.sessionId, '');
    assert.equal(early.value.mode, 'bypass');
  }
  assert.equal(parseSessionInfo({ version: 1 }).ok, false);
});
