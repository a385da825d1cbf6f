import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseQuestions } from '../activity';
import { formProblem, initialValue, parseForm, readValue } from '../formmodel';
import { parseToolCall } from '../payload';

const confirmation = {
  title: 'Typed confirmation',
  fields: [
    {
      name: 'workspace',
      title: 'Workspace name',
      kind: 'text',
      description: 'Type prod to approve; anything else rejects.',
      choices: [],
      required: true,
      default: null,
      mustEqual: 'prod'
    }
  ]
};

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
  const form = parseForm(confirmation)!;
  assert.equal(form.fields[0].mustEqual, 'prod');
  const values = { workspace: initialValue(form.fields[0]) };
  assert.equal(values.workspace, '');
  assert.equal(formProblem(form, values), 'Workspace name is required');
  for (const typed of ['pro', 'Prod', 'prod-1', 'production']) {
    assert.equal(formProblem(form, { workspace: readValue(form.fields[0], typed) }), 'the typed workspace name did not match');
  }
  assert.equal(formProblem(form, { workspace: readValue(form.fields[0], ' prod ') }), null);
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
  const parsed = parseToolCall({
    version: 1,
    callId: 'c1',
    name: 'bash',
    title: 'terraform apply',
    kind: 'execute',
    status: 'awaiting_permission',
    input: {},
    output: null,
    outputTruncated: false,
    diff: null,
    locations: [],
    sessionId: 's',
    question: { id: 'q1', state: 'pending', danger: true, reason: 'r', options: ['reject_once', 'allow_once'], answer: null, form: confirmation, labels: { allow_once: 'Allow once', x: 3 }, kind: 'execute' }
  });
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
