import assert from 'node:assert/strict';
import { test } from 'node:test';

import { formatTokens } from '../cards/format';
import { parseSessionInfo, parseToolCall, parseUsage } from '../cards/payload';
import { CARDS } from './fixtures';

const card = CARDS.edit;

test('a well-formed card parses without warnings', () => {
  const parsed = parseToolCall(card);
  assert.ok(parsed.ok);
  if (parsed.ok) {
    assert.deepEqual(parsed.warnings, []);
    assert.equal(parsed.value.status, 'awaiting_permission');
    assert.deepEqual(parsed.value.diff, { path: '/w/main.tf', oldText: null, newText: 'x\n' });
  }
});

test('non-objects and cards without ids are errors, not exceptions', () => {
  for (const bad of [null, 'text', 42, [], { name: 'x', status: 'done' }, { ...card, status: 7 }]) {
    const parsed = parseToolCall(bad);
    assert.equal(parsed.ok, false);
  }
});

test('unknown kind, status and a newer version are warnings', () => {
  const parsed = parseToolCall({ ...card, kind: 'teleport', status: 'queued', version: 2 });
  assert.ok(parsed.ok);
  if (parsed.ok) {
    assert.equal(parsed.value.kind, 'other');
    assert.equal(parsed.value.status, 'queued');
    assert.equal(parsed.warnings.length, 3);
  }
});

test('a malformed diff is dropped with a warning', () => {
  const parsed = parseToolCall({ ...card, diff: { path: 'a', oldText: 3, newText: 'x' } });
  assert.ok(parsed.ok);
  if (parsed.ok) {
    assert.equal(parsed.value.diff, null);
    assert.match(parsed.warnings.join(), /oldText/);
  }
});

test('a missing title falls back to the tool name; junk locations are dropped', () => {
  const parsed = parseToolCall({ ...card, title: '', locations: ['a', 3, null, 'b'] });
  assert.ok(parsed.ok);
  if (parsed.ok) {
    assert.equal(parsed.value.title, 'write_file');
    assert.deepEqual(parsed.value.locations, ['a', 'b']);
  }
});

test('usage reads camelCase and the core snake_case and totals it', () => {
  assert.deepEqual(parseUsage({ input_tokens: 10, output_tokens: 5 }), {
    inputTokens: 10,
    outputTokens: 5,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    totalTokens: 15
  });
  assert.equal(parseUsage({ inputTokens: 1, totalTokens: 99 })?.totalTokens, 99);
  assert.equal(parseUsage('nope'), null);
});

test('session info needs a session id, or a model or mode (before the first prompt)', () => {
  assert.equal(parseSessionInfo({ title: 't' }).ok, false);
  assert.equal(parseSessionInfo({ model: 7 }).ok, false);
  assert.equal(parseSessionInfo({ model: 'm' }).ok, true);
  const parsed = parseSessionInfo({
    version: 1,
    sessionId: 's',
    model: 'scripted',
    mode: 'default',
    usage: { totalTokens: 1200 }
  });
  assert.ok(parsed.ok);
  if (parsed.ok) {
    assert.equal(parsed.value.model, 'scripted');
    assert.equal(parsed.value.usage?.totalTokens, 1200);
    assert.equal(parsed.value.turnUsage, null);
  }
});

test('token counts are short', () => {
  assert.equal(formatTokens(999), '999');
  assert.equal(formatTokens(1234), '1.2k');
  assert.equal(formatTokens(45_600), '46k');
  assert.equal(formatTokens(999_999), '1.0M');
  assert.equal(formatTokens(2_500_000), '2.5M');
});
