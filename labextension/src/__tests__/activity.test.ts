import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  SessionActivity,
  parsePullRequests,
  requestLabel,
  requestLine
} from '../status/activity';
import { answerOrder, parseQuestions } from '../questions/model';
import { SESSION_MIME, TOOLCALL_MIME } from '../cards/payload';

function display(callId: string, status: string, parent = 'exec-1', type = 'display_data') {
  return {
    header: { msg_type: type },
    parent_header: { msg_id: parent, msg_type: 'execute_request' },
    content: {
      data: {
        [TOOLCALL_MIME]: {
          version: 1,
          callId,
          name: 'write_file',
          title: 'Write a file',
          kind: 'edit',
          status,
          input: {},
          output: null,
          outputTruncated: false,
          diff: null,
          locations: [],
          sessionId: 'sess-1'
        },
        'text/plain': 'card'
      },
      metadata: {},
      transient: { display_id: callId }
    }
  };
}

function idle(parent: string, parentType = 'execute_request') {
  return {
    header: { msg_type: 'status' },
    parent_header: { msg_id: parent, msg_type: parentType },
    content: { execution_state: 'idle' }
  };
}

test('a card waiting for permission is pending until it updates', () => {
  const activity = new SessionActivity();
  let changes = 0;
  activity.subscribe(() => changes++);
  activity.handle(display('c1', 'running'));
  assert.equal(activity.running.length, 1);
  activity.handle(display('c1', 'awaiting_permission', 'exec-1', 'update_display_data'));
  assert.deepEqual(
    activity.pending.map(call => call.callId),
    ['c1']
  );
  assert.equal(activity.running.length, 0);
  activity.handle(display('c1', 'done', 'exec-1', 'update_display_data'));
  assert.equal(activity.pending.length, 0);
  assert.equal(activity.callCount, 1);
  assert.equal(activity.sessionId, 'sess-1');
  assert.equal(changes, 3);
});

test('the end of the execute_request retires its unfinished calls', () => {
  const activity = new SessionActivity();
  activity.handle(display('c1', 'awaiting_permission', 'exec-1'));
  activity.handle(display('c2', 'awaiting_permission', 'exec-2'));
  // Idle after a comm message (a button click) is not the end of the turn.
  assert.equal(activity.handle(idle('comm-1', 'comm_msg')), false);
  assert.equal(activity.pending.length, 2);
  assert.equal(activity.handle(idle('exec-1')), true);
  assert.deepEqual(
    activity.pending.map(call => call.callId),
    ['c2']
  );
});

test('an update keeps the parent of the display that created the card', () => {
  const activity = new SessionActivity();
  activity.handle(display('c1', 'running', 'exec-1'));
  activity.handle(display('c1', 'awaiting_permission', 'other', 'update_display_data'));
  activity.handle(idle('exec-1'));
  assert.equal(activity.pending.length, 0);
});

test('session info comes from its own bundle or from metadata', () => {
  const activity = new SessionActivity();
  activity.handle({
    header: { msg_type: 'display_data' },
    content: {
      data: { 'text/plain': 'x' },
      metadata: { [SESSION_MIME]: { version: 1, sessionId: 's1', model: 'scripted', mode: 'default' } }
    }
  });
  assert.equal(activity.session?.model, 'scripted');
  activity.handle({
    header: { msg_type: 'display_data' },
    content: {
      data: { [SESSION_MIME]: { sessionId: 's1', model: 'm2', usage: { total_tokens: 7 } } },
      metadata: {}
    }
  });
  assert.equal(activity.session?.model, 'm2');
  assert.equal(activity.session?.usage?.totalTokens, 7);
  assert.ok(activity.seen);
});

test('garbage messages change nothing and do not throw', () => {
  const activity = new SessionActivity();
  const junk: unknown[] = [
    {},
    { header: { msg_type: 'display_data' }, content: null },
    { header: { msg_type: 'display_data' }, content: { data: { [TOOLCALL_MIME]: 'nope' } } },
    { header: { msg_type: 'stream' }, content: { text: 'hi' } },
    { header: { msg_type: 'status' }, content: { execution_state: 'idle' } }
  ];
  for (const msg of junk) {
    assert.equal(activity.handle(msg as never), false);
  }
  assert.equal(activity.seen, false);
});

test('reset forgets calls and session', () => {
  const activity = new SessionActivity();
  activity.handle(display('c1', 'awaiting_permission'));
  activity.reset();
  assert.equal(activity.pending.length, 0);
  assert.equal(activity.sessionId, null);
});

const kernelInfo = {
  version: 1,
  sessionId: null,
  model: 'scripted',
  mode: 'read_only',
  title: null,
  cwd: '/w',
  usage: null,
  turnUsage: null,
  pending: 1,
  busy: true,
  questions: [
    {
      id: 'q-7',
      callId: 'toolu_7',
      title: 'bash: terraform force-unlock -force 1234',
      danger: true,
      reason: 'This command changes real infrastructure or data; approve each call.',
      options: ['allow_once', 'reject_once'],
      command: 'terraform force-unlock -force 1234'
    },
    { id: 5, callId: 'bad' }
  ]
};

test('kernel info gives model and mode before any answer, and the waiting questions', () => {
  const activity = new SessionActivity();
  let changes = 0;
  activity.subscribe(() => changes++);
  assert.ok(activity.setKernelInfo(kernelInfo));
  assert.equal(changes, 1);
  assert.ok(activity.seen);
  assert.equal(activity.session?.model, 'scripted');
  assert.equal(activity.session?.mode, 'read_only');
  // Nothing seen live on this page, but the kernel knows one question waits.
  assert.equal(activity.pending.length, 0);
  assert.equal(activity.pendingCount, 1);
  assert.equal(activity.firstPendingCallId, 'toolu_7');
  assert.equal(activity.questions.length, 1);
  assert.equal(activity.busy, true);
});

test('kernel info wrapped as {session, pending} (kernel_info_reply form) works too', () => {
  const activity = new SessionActivity();
  assert.ok(
    activity.setKernelInfo({ session: { sessionId: 's1', model: 'm', mode: 'bypass' }, pending: [] })
  );
  assert.equal(activity.session?.mode, 'bypass');
  assert.equal(activity.pendingCount, 0);
  assert.equal(activity.setKernelInfo('nope'), false);
  assert.equal(activity.setKernelInfo({ version: 1 }), false);
});

test('kernel info keeps the token counts a turn summary gave for the same session', () => {
  const activity = new SessionActivity();
  activity.setKernelInfo({ sessionId: 's1', model: 'm', mode: 'default', usage: { total_tokens: 9 } });
  activity.setKernelInfo({ sessionId: 's1', model: 'm', mode: 'bypass' });
  assert.equal(activity.session?.usage?.totalTokens, 9);
  assert.equal(activity.session?.mode, 'bypass');
  activity.reset();
  assert.equal(activity.pendingCount, 0);
  assert.equal(activity.session, null);
});

test('kernel info says which applies wait for approval, in the record\'s words', () => {
  const activity = new SessionActivity();
  const waiting = { id: 'a1b2c3', waiting: 'waiting for 1 approval by platform', rule: 'prod' };
  activity.setKernelInfo({ ...kernelInfo, approvals: [waiting, { id: 'x' }, 'bad'] });
  assert.deepEqual(activity.approvals, [waiting]);
  // The next word from the kernel without it: the wait is over.
  activity.setKernelInfo({ ...kernelInfo, approvals: [] });
  assert.deepEqual(activity.approvals, []);
  activity.setKernelInfo({ ...kernelInfo, approvals: [waiting] });
  activity.reset();
  assert.deepEqual(activity.approvals, []);
});

test('kernel info lists the requests the kernel opened, newest last, bad ones left out', () => {
  const activity = new SessionActivity();
  const first = { number: 3, url: 'http://forge.test/octo/infra/pull/3', noun: 'pull request' };
  const second = { number: 7, url: 'https://gitlab.test/g/p/-/merge_requests/7', noun: 'merge request' };
  const malformed = [
    { ...first, url: 'javascript:alert(1)' }, // never a link that runs code
    { ...first, url: 'data:text/html,hi' },
    { ...first, url: 'not a url' },
    { ...first, number: 0 },
    { ...first, number: 2.5 },
    { ...first, number: '3' },
    { ...first, noun: 'issue' },
    { url: first.url, noun: first.noun },
    'bad',
    null
  ];
  activity.setKernelInfo({ ...kernelInfo, pullRequests: [first, ...malformed, second] });
  assert.deepEqual(activity.pullRequests, [first, second]);
  activity.setKernelInfo({ ...kernelInfo, pullRequests: 'nope' });
  assert.deepEqual(activity.pullRequests, []);
  activity.setKernelInfo({ ...kernelInfo, pullRequests: [first] });
  activity.reset();
  assert.deepEqual(activity.pullRequests, []);
  assert.deepEqual(parsePullRequests(undefined), []);
});

test('a request is named as its forge names it: PR #N, MR !N', () => {
  const [pull, merge] = parsePullRequests([
    { number: 12, url: 'https://github.test/o/r/pull/12', noun: 'pull request' },
    { number: 4, url: 'https://gitlab.test/g/p/-/merge_requests/4', noun: 'merge request' }
  ]);
  assert.equal(requestLabel(pull), 'PR #12');
  assert.equal(requestLabel(merge), 'MR !4');
  assert.equal(requestLine(pull), 'Pull request #12: https://github.test/o/r/pull/12');
  assert.equal(requestLine(merge), 'Merge request !4: https://gitlab.test/g/p/-/merge_requests/4');
});

test('a live pending call counts even before the kernel says so', () => {
  const activity = new SessionActivity();
  activity.handle(display('c1', 'awaiting_permission'));
  assert.equal(activity.pendingCount, 1);
  assert.equal(activity.firstPendingCallId, 'c1');
});

test('danger questions offer Reject first; others Allow first', () => {
  const [danger] = parseQuestions(kernelInfo.questions);
  assert.deepEqual(answerOrder(danger), ['reject_once', 'allow_once']);
  const routine = { ...danger, danger: false, options: ['allow_once', 'allow_always', 'reject_once', 'reject_always'] };
  assert.deepEqual(answerOrder(routine), ['allow_once', 'allow_always', 'reject_once', 'reject_always']);
});

test('a card is live only when this page sent the request that made it', () => {
  const activity = new SessionActivity();
  activity.handle(display('c1', 'awaiting_permission', 'exec-mine'));
  activity.handle(display('c2', 'awaiting_permission', 'exec-before-reload'));
  activity.markOwnRequest('exec-mine');
  assert.equal(activity.seesLive('c1'), true);
  // A turn started before a reload: its updates reach this page but no cell.
  assert.equal(activity.seesLive('c2'), false);
  assert.equal(activity.seesLive('unknown'), false);
});
