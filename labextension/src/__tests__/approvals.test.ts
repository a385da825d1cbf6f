import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  askedText,
  errorLine,
  expiresText,
  outcomeText,
  parseListing,
  planPayloadOf,
  recordInUrl
} from '../approvals/model';
import { PLAN_MIME } from '../plan/model';

const record = {
  id: '3f2a9c1b7d0e',
  requester: 'alice',
  status: 'pending',
  plan_sha256: 'a'.repeat(64),
  summary: 'Plan: 0 to add, 0 to change, 1 to destroy.',
  rule: 'production needs a second person',
  required: 1,
  waiting: 'waiting for 1 approval by platform',
  yours: false,
  answered: false,
  approvals: [],
  rejection: null,
  created_at: '2026-12-07T17:00:00Z',
  expires_at: '2026-12-08T17:00:00Z'
};

test('a listing keeps readable records and drops the rest', () => {
  const listing = parseListing({ you: 'bob', approvals: [record, { summary: 'no id' }, 7] });
  assert.equal(listing.you, 'bob');
  assert.deepEqual(
    listing.approvals.map(a => [a.id, a.requester, a.waiting]),
    [[record.id, 'alice', 'waiting for 1 approval by platform']]
  );
  assert.deepEqual(parseListing(null), { you: '', approvals: [] });
});

test('times read in words', () => {
  const now = Date.parse('2026-12-07T17:05:00Z');
  assert.equal(expiresText(record.expires_at, now), 'expires in 24 h');
  assert.equal(askedText(record.created_at, now), 'asked 5 min ago');
  assert.equal(expiresText('2026-12-07T17:00:00Z', now), 'expired');
  assert.equal(expiresText(null, now), '');
});

test('a decided record says who decided', () => {
  const rejected = parseListing({
    approvals: [{ ...record, status: 'rejected', rejection: { by: 'bob', note: 'not now' } }]
  }).approvals[0];
  assert.equal(outcomeText(rejected), 'rejected by bob: not now');
  const approved = parseListing({
    approvals: [{ ...record, status: 'approved', approvals: [{ by: 'bob', note: null }] }]
  }).approvals[0];
  assert.equal(outcomeText(approved), 'approved by bob');
});

test("the card's plan is found in the plan card's JSON or in its bundle", () => {
  const data = { version: 1, plan: { summary: 'Plan', resources: [] }, rows: { v: 1 } };
  assert.deepEqual(planPayloadOf(data), { plan: data.plan, rows: data.rows });
  assert.deepEqual(planPayloadOf({ [PLAN_MIME]: data, 'text/plain': 'Plan' })?.plan, data.plan);
  // The apply question's review, as tools/tf_apply.py keeps it with the record.
  const review = { kind: 'terraform_apply', text: 'Apply?', plan: data.plan, rows: data.rows };
  assert.deepEqual(planPayloadOf(review), { plan: data.plan, rows: data.rows });
  assert.equal(planPayloadOf({ text: 'no plan' }), null);
  assert.equal(planPayloadOf(null), null);
});

test('a link opens a record by its query or fragment; anything else opens none', () => {
  assert.equal(recordInUrl('https://hub/user/bob/lab?iac-approval=3f2a9c1b7d0e'), '3f2a9c1b7d0e');
  assert.equal(recordInUrl('http://127.0.0.1:8888/lab#iac-approval=abc'), 'abc');
  assert.equal(recordInUrl('http://127.0.0.1:8888/lab?iac-approval=<script>'), null);
  assert.equal(recordInUrl('http://127.0.0.1:8888/lab'), null);
});

test('a refusal is the server message, one line', () => {
  assert.equal(errorLine(409, { message: 'approval x is rejected\nmore' }), 'approval x is rejected');
  assert.equal(errorLine(502, '<html>'), 'the server answered HTTP 502');
});
