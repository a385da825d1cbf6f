/**
 * A question's form (the kernel's `question.form`): a typed confirmation of a destroy or a
 * production apply, or the agent's own question with choices and values. Reading it and
 * checking the values filled in, the same way the kernel's gate does
 * (iac_kernel/agent/forms.py `Form.mismatch`): the approve button stays disabled until
 * `formProblem` is null.
 */

export type FieldKind = 'text' | 'choice' | 'boolean' | 'number';
export type FieldValue = string | number | boolean | null;

export interface IFormField {
  name: string;
  title: string;
  kind: FieldKind;
  description: string;
  choices: string[];
  required: boolean;
  default: FieldValue;
  /** A typed confirmation: the only value that approves. */
  mustEqual: string | null;
}

export interface IForm {
  title: string;
  fields: IFormField[];
}

const KINDS: readonly string[] = ['text', 'choice', 'boolean', 'number'];

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

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
  for (const item of value.fields) {
    if (!isRecord(item) || typeof item.name !== 'string' || !item.name) {
      continue;
    }
    const kind = typeof item.kind === 'string' && KINDS.includes(item.kind) ? item.kind : 'text';
    fields.push({
      name: item.name,
      title: typeof item.title === 'string' && item.title ? item.title : item.name,
      kind: kind as FieldKind,
      description: typeof item.description === 'string' ? item.description : '',
      choices: Array.isArray(item.choices)
        ? item.choices.filter((c): c is string => typeof c === 'string')
        : [],
      required: item.required !== false,
      default: defaultOf(item.default),
      mustEqual: typeof item.mustEqual === 'string' ? item.mustEqual : null
    });
  }
  if (fields.length === 0) {
    return null;
  }
  return { title: typeof value.title === 'string' ? value.title : '', fields };
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
