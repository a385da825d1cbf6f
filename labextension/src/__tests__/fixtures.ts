/**
 * Tool-card payloads as the kernel sends them, for the unit tests. They are typed with the
 * types generated from the kernel's card.schema.json (../schema.ts), and schema.test.ts
 * checks every one of CARDS against the schema file itself. Tests that need a broken or
 * partial payload derive it from these and say so.
 */

import type { FormPayload, QuestionPayload, ToolCallPayload } from '../schema';

/** A whole payload: `fields` over a done call with no output. */
export function toolCall(fields: Partial<ToolCallPayload> = {}): ToolCallPayload {
  const callId = fields.callId ?? 'toolu_1';
  return {
    version: 1,
    callId,
    name: 'read_file',
    title: 'read_file: main.tf',
    kind: 'read',
    status: 'done',
    input: {},
    output: null,
    outputTruncated: false,
    outputNote: null,
    outputLines: 0,
    hidden: null,
    outputHead: null,
    outputTail: null,
    live: false,
    elapsed: null,
    startedAt: null,
    fullOutput: `%output ${callId}`,
    question: null,
    diff: null,
    locations: [],
    sessionId: 'sess-1',
    ...fields
  };
}

/** A whole question: `fields` over a pending one with no form. */
export function question(fields: Partial<QuestionPayload> = {}): QuestionPayload {
  return {
    id: 'q1',
    state: 'pending',
    danger: false,
    reason: 'It changes files.',
    options: ['allow_once', 'allow_always', 'reject_once', 'reject_always'],
    answer: null,
    note: null,
    form: null,
    labels: {},
    kind: 'edit',
    ...fields
  };
}

/** The typed confirmation of a production apply. */
export const CONFIRMATION: FormPayload = {
  title: 'Typed confirmation',
  fields: [
    {
      name: 'workspace',
      title: 'Workspace name',
      kind: 'text',
      description: 'Type prod exactly to approve; a different name never approves this call.',
      choices: [],
      required: true,
      default: null,
      mustEqual: 'prod'
    }
  ]
};

export const CARDS = {
  /** An edit that waits for approval, with the new file's diff. */
  edit: toolCall({
    name: 'write_file',
    title: 'Write main.tf',
    kind: 'edit',
    status: 'awaiting_permission',
    input: { path: 'main.tf', content: 'x' },
    question: question(),
    diff: { path: '/w/main.tf', oldText: null, newText: 'x\n' },
    locations: ['/w/main.tf']
  }),
  /** A long command output, cut to its head and tail. */
  cutOutput: toolCall({
    callId: 'toolu_9',
    name: 'bash',
    title: 'bash: seq 1 4939',
    kind: 'execute',
    input: { command: 'seq 1 4939' },
    output: '1\n…\n4939\n',
    outputTruncated: true,
    outputNote: 'lines 81–4,919 of 4,939 hidden; the agent saw all of it',
    outputLines: 4939,
    hidden: { fromLine: 81, toLine: 4919 },
    outputHead: '1\n',
    outputTail: '4939\n',
    elapsed: 0.4,
    startedAt: 1_700_000_000
  }),
  /** A production apply that asks for the workspace's name. */
  confirmation: toolCall({
    callId: 'c1',
    name: 'bash',
    title: 'terraform apply',
    kind: 'execute',
    status: 'awaiting_permission',
    input: { command: 'terraform apply' },
    question: question({
      danger: true,
      reason: 'It changes real infrastructure.',
      options: ['reject_once', 'allow_once'],
      form: CONFIRMATION,
      labels: { allow_once: 'Allow once' },
      kind: 'execute'
    })
  }),
  /** A call the user rejected with a note. */
  rejected: toolCall({
    name: 'bash',
    title: 'bash: rm -rf build',
    kind: 'execute',
    status: 'denied',
    input: { command: 'rm -rf build' },
    question: question({ state: 'answered', answer: 'reject_once', note: 'keep the build' })
  })
};
