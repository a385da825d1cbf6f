/**
 * Questions and their forms as data (no DOM, so the unit tests run in node): a question's
 * options, labels and answer order, the kernel's list of waiting questions, and a
 * question's form (`question.form`: a typed confirmation of a destroy or a production
 * apply, or the agent's own question with choices and values), read and checked the same
 * way the kernel's gate does (iac_kernel/agent/forms.py `Form.mismatch`): the approve
 * button stays disabled until `formProblem` is null.
 */

import { Loose, isRecord, optionalText, stringMap, strings } from '../json';
import type { FieldPayload, FormPayload, QuestionPayload } from '../schema';

export type FieldKind = FieldPayload['kind'];
export type FieldValue = FieldPayload['default'];
/** A form field as the card's schema describes it (`mustEqual`: a typed confirmation). */
export type IFormField = FieldPayload;

export interface IForm extends Pick<FormPayload, 'title'> {
  fields: IFormField[];
}

/** What every question says, on a card (`question`) or in the kernel's waiting list;
 * `labels` are absent from older cards. */
export interface IQuestionBase
  extends Pick<QuestionPayload, 'id' | 'danger' | 'reason' | 'options' | 'labels'> {
  form: IForm | null;
}

/** A permission question the kernel says is waiting for an answer. */
export interface IPendingQuestion extends IQuestionBase {
  callId: string;
  title: string;
  command: string | null;
}

/** Sends the answer to a question (on the kernel's status channel); rejects with the
 * kernel's reason when it is stale. */
export type AnswerQuestion = (
  questionId: string,
  option: string,
  note?: string,
  values?: Record<string, FieldValue>
) => Promise<void>;

/** Labels of the options when the kernel sends none (as its OPTION_NAMES). */
export const OPTION_LABELS: Record<string, string> = {
  allow_once: 'Allow once',
  allow_always: 'Allow always',
  reject_once: 'Reject once',
  reject_always: 'Reject always'
};

export function optionLabel(question: Pick<IQuestionBase, 'labels'>, option: string): string {
  return question.labels[option] ?? OPTION_LABELS[option] ?? option;
}

/** Every option but a rejection answers a form (Allow, or an option of the agent's question). */
export function answersForm(option: string): boolean {
  return !option.startsWith('reject');
}

/** Options in display order: a danger question puts the rejections first. */
export function answerOrder(question: Pick<IQuestionBase, 'danger' | 'options'>): string[] {
  const rejects = question.options.filter(o => !answersForm(o));
  const others = question.options.filter(answersForm);
  return question.danger ? [...rejects, ...others] : [...others, ...rejects];
}

/** The fields every question has (`id` must be checked by the caller). */
export function questionBase(value: Loose<QuestionPayload>): IQuestionBase {
  return {
    id: optionalText(value.id) ?? '',
    danger: value.danger === true,
    reason: optionalText(value.reason) ?? '',
    options: strings(value.options),
    labels: stringMap(value.labels),
    form: parseForm(value.form)
  };
}

/** Read the kernel's "questions" list (unreadable entries are skipped). */
export function parseQuestions(value: unknown): IPendingQuestion[] {
  const questions: IPendingQuestion[] = [];
  for (const item of Array.isArray(value) ? value : []) {
    if (!isRecord(item) || typeof item.id !== 'string' || typeof item.callId !== 'string') {
      continue;
    }
    questions.push({
      ...questionBase(item),
      callId: item.callId,
      title: optionalText(item.title) ?? item.callId,
      command: optionalText(item.command)
    });
  }
  return questions;
}

/** Every field kind of the schema (the compiler checks this list against it). */
const FIELD_KINDS: Record<FieldKind, null> = { text: null, choice: null, boolean: null, number: null };

function defaultOf(value: unknown): FieldValue {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? value
    : null;
}

/** The form, or null when absent or unreadable (fields without a name are skipped). */
export function parseForm(value: unknown): IForm | null {
  if (!isRecord(value) || !Array.isArray(value.fields)) {
    return null;
  }
  const fields: IFormField[] = [];
  for (const item of value.fields as unknown[]) {
    if (!isRecord(item) || typeof item.name !== 'string' || !item.name) {
      continue;
    }
    const field: Loose<FieldPayload> = item;
    const known = typeof field.kind === 'string' && Object.keys(FIELD_KINDS).includes(field.kind);
    fields.push({
      name: item.name,
      title: typeof field.title === 'string' && field.title ? field.title : item.name,
      kind: known ? (field.kind as FieldKind) : 'text',
      description: optionalText(field.description) ?? '',
      choices: strings(field.choices),
      required: field.required !== false,
      default: defaultOf(field.default),
      mustEqual: optionalText(field.mustEqual)
    });
  }
  if (fields.length === 0) {
    return null;
  }
  const form: Loose<FormPayload> = value;
  return { title: optionalText(form.title) ?? '', fields };
}

/** Why `value` does not answer `field`, or null (as the kernel's FormField.problem). */
export function fieldProblem(field: IFormField, value: FieldValue | undefined): string | null {
  if (value === null || value === undefined || value === '') {
    return field.required ? `${field.title} is required` : null;
  }
  if (field.kind === 'choice' && !field.choices.includes(String(value))) {
    return `${field.title} must be one of: ${field.choices.join(', ')}`;
  }
  if (field.kind === 'boolean' && typeof value !== 'boolean') {
    return `${field.title} must be true or false`;
  }
  if (field.kind === 'number' && (typeof value !== 'number' || !Number.isFinite(value))) {
    return `${field.title} must be a number`;
  }
  if (field.mustEqual !== null && String(value).trim() !== field.mustEqual) {
    return `the typed ${field.title.toLowerCase()} did not match`;
  }
  return null;
}

/** The first problem of `values`, or null when they answer every field. */
export function formProblem(form: IForm, values: Record<string, FieldValue>): string | null {
  for (const field of form.fields) {
    const problem = fieldProblem(field, values[field.name]);
    if (problem) {
      return problem;
    }
  }
  return null;
}

/** What a typed confirmation does to the approving button, in words (as the kernel's
 * widgets.locked_note). */
export function lockedNote(text: string, button: string): string {
  return `${button} stays disabled until you type ${text} exactly.`;
}

/** Why `button` is disabled, or null when the values answer the form: a typed
 * confirmation says what to type (a wrong name approves nothing), other fields their
 * problem. */
export function blockedNote(
  form: IForm,
  values: Record<string, FieldValue>,
  button: string
): string | null {
  for (const field of form.fields) {
    const problem = fieldProblem(field, values[field.name]);
    if (problem) {
      return field.mustEqual !== null && button ? lockedNote(field.mustEqual, button) : problem;
    }
  }
  return null;
}

/** The value a field starts with (a typed confirmation starts empty). */
export function initialValue(field: IFormField): FieldValue {
  if (field.kind === 'boolean') {
    return field.default === true;
  }
  if (field.mustEqual !== null) {
    return '';
  }
  return field.default;
}

/** What the user entered in a field's control, as the field's value. */
export function readValue(field: IFormField, raw: string | boolean): FieldValue {
  if (field.kind === 'boolean') {
    return raw === true;
  }
  const text = String(raw);
  if (field.kind === 'number') {
    return text.trim() === '' ? null : Number(text);
  }
  if (field.kind === 'choice') {
    return text === '' ? null : text;
  }
  return text.trim();
}

/** The hint in a text field: what to type for a typed confirmation. */
export function placeholderOf(field: IFormField): string {
  return field.mustEqual !== null ? `type ${field.mustEqual} to approve` : field.description;
}
