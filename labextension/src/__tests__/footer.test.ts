import assert from 'node:assert/strict';
import { test } from 'node:test';

import { footerLine, parseFooter } from '../status/footermodel';

test('a footer payload reads back, with bad counts as 0', () => {
  const footer = parseFooter({
    v: 1,
    model: 'anthropic:claude-sonnet-4-6',
    input: 1000,
    cacheRead: 3000,
    output: -5,
    elapsed: 2.25,
    stopReason: 'end_turn'
  });
  assert.ok(footer);
  assert.equal(footer.output, 0);
  assert.equal(
    footerLine(footer),
    'anthropic:claude-sonnet-4-6 · 4.0k in (75% cached) · 0 out · 2.3 s'
  );
});

test('no cache reads: no cached share; not a footer: null', () => {
  const footer = parseFooter({ model: 'scripted', input: 40, output: 7, elapsed: 0 });
  assert.ok(footer);
  assert.equal(footerLine(footer), 'scripted · 40 in · 7 out · 0.0 s');
  assert.equal(parseFooter(null), null);
  assert.equal(parseFooter({ input: 1 }), null);
});

test('a list-price cost shows when the kernel gives one, never a bad one', () => {
  const base = { model: 'anthropic:claude-haiku-4-5', input: 40, output: 7, elapsed: 1 };
  const priced = parseFooter({ ...base, cost: 0.01234 });
  assert.ok(priced);
  assert.equal(footerLine(priced), 'anthropic:claude-haiku-4-5 · 40 in · 7 out · 1.0 s · ≈$0.0123 (list price)');
  for (const cost of [-1, 'free', null, Number.NaN]) {
    const footer = parseFooter({ ...base, cost });
    assert.ok(footer);
    assert.equal(footer.cost, null);
    assert.ok(!footerLine(footer).includes('$'));
  }
});
