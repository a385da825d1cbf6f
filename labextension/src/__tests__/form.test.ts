import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseToolCall } from '../cards/payload';
import {
  blockedNote,
  formProblem,
  initialValue,
  parseForm,
  parseQuestions,
  readValue
} from '../questions/model';
import { CARDS, CONFIRMATION } from './fixtures';

const question = {
  title: 'Which way?',
  fields: [
    { name: 'region', title: 'Region', kind: 'choice', choices: ['eu-west-1', 'us-east-1'] },
    { name: 'force', title: 'Force', kind: 'boolean', required: false, default: false },
    { name: 'count', title: 'Count', kind: 'number', default: 2 },
    { name: 'note', title: 'Note', kind: 'text', required: false }
  ]
};

test('a typed confirmation approves only with the exact name', () => {
  const form = parseForm(CONFIRMATION)!;
  assert.equal(form.fields[0].mustEqual, 'prod');
  const values = { workspace: initialValue(form.fields[0]) };
  assert.equal(values.workspace, '');
  assert.equal(formProblem(form, values), 'Workspace name is required');
  for (const typed of ['pro', 'Prod', 'prod-1', 'production']) {
    assert.equal(formProblem(form, { workspace: readValue(form.fields[0], typed) }), 'the typed workspace name did not match');
  }
  assert.equal(formProblem(form, { workspace: readValue(form.fields[0], ' prod ') }), null);
});

test('a typed confirmation says Allow stays disabled until the exact name, never that it rejects', () => {
  const form = parseForm(CONFIRMATION)!;
  const locked = 'Allow once stays disabled until you type prod exactly.';
  for (const typed of ['', 'pro', 'Prod', 'production']) {
    assert.equal(blockedNote(form, { workspace: readValue(form.fields[0], typed) }, 'Allow once'), locked);
  }
  assert.equal(blockedNote(form, { workspace: 'prod' }, 'Allow once'), null);
  assert.doesNotMatch(form.fields[0].description, /rejects/);
  // Other fields name their own problem.
  const other = parseForm(question)!;
  assert.equal(blockedNote(other, { region: null, count: 2 }, 'Answer'), 'Region is required');
});

test('every field kind is read and checked as the kernel does', () => {
  const form = parseForm(question)!;
  assert.deepEqual(
    form.fields.map(f => [f.kind, f.required]),
    [
      ['choice', true],
      ['boolean', false],
      ['number', true],
      ['text', false]
    ]
  );
  const values = Object.fromEntries(form.fields.map(f => [f.name, initialValue(f)]));
  assert.deepEqual({ ...values }, { region: null, force: false, count: 2, note: null });
  assert.equal(formProblem(form, values), 'Region is required');
  values.region = readValue(form.fields[0], 'us-east-1');
  assert.equal(formProblem(form, values), null);
  values.region = 'ap-south-1';
  assert.match(formProblem(form, values) ?? '', /must be one of/);
  values.region = 'eu-west-1';
  values.count = readValue(form.fields[2], 'abc');
  assert.equal(formProblem(form, values), 'Count must be a number');
  values.count = readValue(form.fields[2], '3.5');
  assert.equal(values.count, 3.5);
  assert.equal(readValue(form.fields[1], true), true);
});

test('an unreadable form is no form', () => {
  assert.equal(parseForm(null), null);
  assert.equal(parseForm({ fields: 'x' }), null);
  assert.equal(parseForm({ fields: [{ title: 'no name' }] }), null);
  const odd = parseForm({ fields: [{ name: 'x', kind: 'slider' }] })!;
  assert.equal(odd.fields[0].kind, 'text');
  assert.equal(odd.fields[0].title, 'x');
});

test('the card and the pending questions carry the form', () => {
  const card = CARDS.confirmation;
  const parsed = parseToolCall({ ...card, question: { ...card.question, labels: { allow_once: 'Allow once', x: 3 } } });
  assert.ok(parsed.ok);
  if (parsed.ok) {
    assert.equal(parsed.value.question?.form?.fields[0].mustEqual, 'prod');
    assert.deepEqual(parsed.value.question?.labels, { allow_once: 'Allow once' });
    assert.equal(parsed.value.question?.kind, 'execute');
  }
  const [pending] = parseQuestions([{ id: 'q1', callId: 'c1', form: question }]);
  assert.equal(pending.form?.fields.length, 4);
  assert.equal(parseQuestions([{ id: 'q2', callId: 'c2' }])[0].form, null);
});
