import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ForeignTurns, IMessage, IOutputList } from '../channel/reroute';

class Outputs implements IOutputList {
  items: Record<string, any>[] = [];
  get length(): number {
    return this.items.length;
  }
  get(index: number) {
    const item = this.items[index];
    return { toJSON: () => item };
  }
  add(output: Record<string, any>): number {
    this.items.push(output);
    return this.items.length;
  }
  set(index: number, output: Record<string, any>): void {
    this.items[index] = output;
  }
}

function msg(type: string, content: Record<string, any>, parent = 'req-1'): IMessage {
  return { header: { msg_type: type }, parent_header: { msg_id: parent }, content };
}

test('a foreign turn writes into its cell: records replace saved buttons, text is added', () => {
  const turns = new ForeignTurns();
  turns.learn({ turns: [{ msgId: 'req-1', cellId: 'cell-a' }, { msgId: 'own', cellId: 'cell-b' }] }, id => id === 'own');
  assert.equal(turns.cellOf(msg('stream', {})), 'cell-a');
  assert.equal(turns.cellOf(msg('stream', {}, 'own')), null);

  const outputs = new Outputs();
  outputs.add({ output_type: 'display_data', data: { 'application/vnd.jupyter.widget-view+json': {} }, metadata: { iac_display_id: 'iac-permission-q1' } });
  const record = { 'text/markdown': 'Rejected once' };
  turns.route(msg('update_display_data', { data: record, metadata: { iac_display_id: 'iac-permission-q1' }, transient: { display_id: 'iac-permission-q1' } }), outputs);
  assert.deepEqual(outputs.items[0].data, record);

  turns.route(msg('display_data', { data: { x: 1 }, metadata: {}, transient: { display_id: 'iac-text-1' } }), outputs);
  turns.route(msg('update_display_data', { data: { 'text/markdown': 'done' }, metadata: {}, transient: { display_id: 'iac-text-1' } }), outputs);
  assert.equal(outputs.length, 2);
  assert.deepEqual(outputs.items[1].data, { 'text/markdown': 'done' });

  // An update for text that started before the reload is added; an unknown card is not.
  turns.route(msg('update_display_data', { data: { 'text/markdown': 'late' }, transient: { display_id: 'iac-text-0' } }), outputs);
  assert.equal(outputs.length, 3);
  assert.equal(turns.route(msg('update_display_data', { data: {}, transient: { display_id: 'iac-tool-9' } }), outputs), false);

  turns.route(msg('status', { execution_state: 'idle' }), outputs);
  assert.equal(turns.cellOf(msg('stream', {})), null);
  assert.equal(turns.size, 0);
});

test('an unknown card is asked of the kernel once, and its displays restored in order', () => {
  const asked: [string, string, string | null][] = [];
  const turns = new ForeignTurns(undefined, (turn, displayId, callId) => asked.push([turn.cellId, displayId, callId]));
  turns.learn({ turns: [{ msgId: 'req-1', cellId: 'cell-a' }] }, () => false);
  const outputs = new Outputs();
  const CARD = 'application/vnd.iac-kernel.toolcall+json';
  const card = (status: string, output: string) => ({ [CARD]: { callId: 'call-7', status, output } });
  const update = (displayId: string, data: Record<string, any>) =>
    msg('update_display_data', { data, metadata: {}, transient: { display_id: displayId } });
  assert.equal(turns.route(update('iac-tool-7', card('running', 'line 1')), outputs), false);
  turns.route(update('iac-tool-7', card('running', 'line 1\nline 2')), outputs);
  turns.route(update('iac-permission-q', { 'text/markdown': 'Allowed once' }), outputs);
  turns.route(update('iac-permission-q', { 'text/markdown': 'Allowed once' }), outputs);
  // One question per call or display: a card's later updates do not ask again; the
  // record names no call, so it is asked by its display id (the kernel finds its call).
  assert.deepEqual(asked, [
    ['cell-a', 'iac-tool-7', 'call-7'],
    ['cell-a', 'iac-permission-q', null]
  ]);
  assert.equal(outputs.length, 0);

  const shown = [
    { displayId: 'iac-tool-7', data: card('running', 'line 1\nline 2'), metadata: {} },
    { displayId: 'iac-plan-1', data: { 'text/plain': 'plan' }, metadata: {} },
    { displayId: 'iac-permission-q', data: { 'text/markdown': 'Allowed once' }, metadata: { iac_display_id: 'iac-permission-q' } },
    'junk'
  ];
  assert.equal(turns.restore('req-1', shown, outputs), true);
  assert.deepEqual(outputs.items.map(o => Object.keys(o.data)[0]), [CARD, 'text/plain', 'text/markdown']);
  assert.equal(outputs.items[2].metadata.iac_display_id, 'iac-permission-q');
  // Updates after the reply go to the restored outputs.
  assert.equal(turns.route(update('iac-tool-7', card('done', 'line 1\nline 2\nline 3')), outputs), true);
  assert.equal(outputs.length, 3);
  assert.equal(outputs.items[0].data[CARD].status, 'done');
  // A second reply replaces, never duplicates.
  turns.restore('req-1', shown.slice(0, 3), outputs);
  assert.equal(outputs.length, 3);
  assert.equal(turns.restore('req-1', null, outputs), false);
});

test('a saved card is found by its call id; junk info is ignored', () => {
  const turns = new ForeignTurns();
  turns.learn({ turns: [null, { msgId: 3 }, { msgId: 'r', cellId: 'c' }] }, () => false);
  turns.learn('junk', () => false);
  assert.equal(turns.size, 1);
  const outputs = new Outputs();
  const card = (status: string) => ({ 'application/vnd.iac-kernel.toolcall+json': { callId: 'call-1', status } });
  outputs.add({ output_type: 'display_data', data: card('awaiting_permission'), metadata: {} });
  turns.route(msg('update_display_data', { data: card('denied'), transient: { display_id: 'iac-tool-x' } }, 'r'), outputs);
  assert.equal(outputs.items[0].data['application/vnd.iac-kernel.toolcall+json'].status, 'denied');
});

test('a card saved mid-question says so and what became of the call', async () => {
  const { staleCard, SAVED_ASKING } = await import('../cards/stale');
  const card = { callId: 'c', status: 'awaiting_permission', live: true, question: { id: 'q', state: 'pending', danger: true } };
  const denied = staleCard(card, 'denied');
  assert.equal(denied.status, 'denied');
  assert.equal(denied.question.state, 'saved');
  assert.match(denied.question.note, /saved while this question waited/i);
  assert.match(denied.question.note, /rejected/);
  const unknown = staleCard(card, null);
  assert.equal(unknown.status, SAVED_ASKING);
  assert.match(unknown.question.note, /does not know/);
  assert.equal(staleCard(card, 'weird').status, SAVED_ASKING);
});

test('keys a, r and digits pick the matching button', async () => {
  const { buttonForKey } = await import('../questions/keys');
  const labels = ['Reject once', 'Allow once', 'Always allow `terraform plan` …'];
  assert.equal(buttonForKey('a', labels), 1);
  assert.equal(buttonForKey('r', labels), 0);
  assert.equal(buttonForKey('3', labels), 2);
  assert.equal(buttonForKey('4', labels), null);
  assert.equal(buttonForKey('x', labels), null);
  assert.equal(buttonForKey('a', ['Reject once']), null);
});

test('a foreign turn marks its cell running, then gives it its execution count', () => {
  const states: [string, boolean, number | null][] = [];
  const turns = new ForeignTurns((cell, running, count) => states.push([cell, running, count]));
  turns.learn({ turns: [{ msgId: 'r', cellId: 'c', executionCount: 7 }] }, () => false);
  turns.learn({ turns: [{ msgId: 'r', cellId: 'c', executionCount: 7 }] }, () => false); // once
  turns.learn({ turns: [{ msgId: 'q', cellId: 'd', executionCount: 'x' }] }, () => false);
  assert.deepEqual(states, [['c', true, 7], ['d', true, null]]);
  turns.route(msg('status', { execution_state: 'busy' }, 'r'), new Outputs());
  turns.route(msg('status', { execution_state: 'idle' }, 'r'), new Outputs());
  assert.deepEqual(states.at(-1), ['c', false, 7]);
  turns.route(msg('status', { execution_state: 'idle' }, 'r'), new Outputs()); // forgotten
  assert.equal(states.length, 3);
});

test('a settled saved card gets HTML and plain forms that say so, escaped', async () => {
  const { staleCard, staleFallback } = await import('../cards/stale');
  const card = { callId: 'c', title: 'bash: <b>apply</b>', status: 'awaiting_permission', question: { state: 'pending' } };
  const forms = staleFallback(staleCard(card, 'denied'));
  assert.match(forms['text/plain'], /^\[denied\] bash: <b>apply<\/b>\nSaved while this question waited/);
  assert.ok(!forms['text/html'].includes('<b>apply'));
  assert.match(forms['text/html'], /&#60;b&#62;apply/);
  assert.ok(!/awaiting/i.test(forms['text/html']));
  assert.match(staleFallback(staleCard(card, null))['text/html'], /saved mid-question/);
});

test('a restart clears the foreign turns and their cells go idle', () => {
  const states: [string, boolean, number | null][] = [];
  const turns = new ForeignTurns((cell, running, count) => states.push([cell, running, count]));
  turns.learn({ turns: [{ msgId: 'r', cellId: 'c', executionCount: 2 }] }, () => false);
  turns.clear();
  assert.deepEqual(states.at(-1), ['c', false, null]);
  assert.equal(turns.size, 0);
  turns.clear();
  assert.equal(states.length, 2);
});
