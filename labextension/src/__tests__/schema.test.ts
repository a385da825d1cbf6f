/**
 * The tool-card payload's one contract, the kernel's card.schema.json (package.json
 * `config.cardSchema`; the kernel's tests check every payload it sends against it): the
 * fixtures of these tests match it, the reader reads every field it names, and the types
 * generated from it (../schema.ts) are current.
 */

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'node:test';

import Ajv2020 from 'ajv/dist/2020';

import { TOOL_KINDS, TOOL_STATUSES, parseToolCall } from '../cards/payload';
import { CARDS, toolCall } from './fixtures';

/** `npm test` runs in the extension's folder. */
const PACKAGE = JSON.parse(readFileSync('package.json', 'utf-8'));
const SCHEMA = JSON.parse(readFileSync(resolve(PACKAGE.config.cardSchema), 'utf-8'));
const validate = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true }).compile(SCHEMA);

/** The schema's complaints about `payload`, one line each. */
function problems(payload: unknown): string[] {
  return validate(payload)
    ? []
    : (validate.errors ?? []).map(e => `${e.instancePath || '(card)'} ${e.message}`);
}

test('every fixture card matches the schema', () => {
  for (const [name, card] of Object.entries(CARDS)) {
    assert.deepEqual(problems(card), [], name);
  }
});

test('the schema refuses what the reader only tolerates', () => {
  const { callId: _dropped, ...noId } = CARDS.edit;
  const broken: Record<string, unknown> = {
    'no callId': noId,
    'an unknown status': { ...CARDS.edit, status: 'queued' },
    'a tool kind the card does not show': { ...CARDS.edit, kind: 'think' },
    'a newer version': { ...CARDS.edit, version: 2 },
    'an unknown field': { ...CARDS.edit, extra: true },
    'a form field of an unknown kind': {
      ...CARDS.confirmation,
      question: {
        ...CARDS.confirmation.question,
        form: { title: 't', fields: [{ ...CARDS.confirmation.question!.form!.fields[0], kind: 'date' }] }
      }
    }
  };
  for (const [what, payload] of Object.entries(broken)) {
    assert.notDeepEqual(problems(payload), [], `${what} passed the schema`);
  }
  // The reader stays lenient: a newer kernel's card is shown, with warnings.
  const newer = parseToolCall(broken['an unknown status']);
  assert.ok(newer.ok && newer.warnings.length === 1);
  assert.equal(parseToolCall(noId).ok, false);
});

test('the reader reads every field the schema names (fullOutput is for other frontends)', () => {
  const card = CARDS.confirmation;
  const parsed = parseToolCall(card);
  assert.ok(parsed.ok);
  if (!parsed.ok) {
    return;
  }
  const fields = (schema: { properties: object }) => Object.keys(schema.properties).sort();
  const unread = ['fullOutput'];
  assert.deepEqual(
    Object.keys(parsed.value).sort(),
    fields(SCHEMA).filter(f => !unread.includes(f))
  );
  assert.deepEqual(Object.keys(parsed.value.question!).sort(), fields(SCHEMA.$defs.question));
  assert.deepEqual(Object.keys(parsed.value.question!.form!.fields[0]).sort(), fields(SCHEMA.$defs.field));
  assert.deepEqual(parsed.warnings, []);
});

test("the kinds and statuses are the schema's", () => {
  assert.deepEqual(TOOL_KINDS, SCHEMA.properties.kind.enum);
  assert.deepEqual(TOOL_STATUSES, SCHEMA.properties.status.enum);
  assert.equal(toolCall().version, SCHEMA.properties.version.const);
});

test('schema.ts is generated from the current schema (npm run build:schema)', () => {
  const generated = spawnSync('npm', ['run', '--silent', 'schema:types'], { encoding: 'utf-8' });
  assert.equal(generated.status, 0, generated.stderr);
  assert.equal(readFileSync('src/schema.ts', 'utf-8'), generated.stdout);
});
