/**
 * A question's form on the tool card, and in the answer dialog after a reload: a labelled
 * control per field (a text field, a choice list, a checkbox, a number field), the focus
 * on the first field, Enter submits, and the approving buttons disabled until the values
 * answer the form (a typed confirmation: the workspace's exact name). The values go back
 * on the kernel's status channel with the answer. Text goes in through textContent only.
 */

import { el } from '../dom';
import {
  FieldValue,
  IForm,
  IFormField,
  IQuestionBase,
  answerOrder,
  answersForm,
  blockedNote,
  formProblem,
  initialValue,
  optionLabel,
  placeholderOf,
  readValue
} from './model';

/** Sends an answer: option, note, values. Rejects with the kernel's reason. */
export type SendAnswer = (
  option: string,
  note: string | undefined,
  values: Record<string, FieldValue> | undefined
) => Promise<void>;


/** What was entered in each question's form, kept while its card is drawn again. */
const entered = new Map<string, Record<string, FieldValue>>();
let counter = 0;

/** The values of a question's form so far (the fields' initial values at first). */
export function enteredValues(key: string, form: IForm): Record<string, FieldValue> {
  let values = entered.get(key);
  if (!values) {
    values = Object.fromEntries(form.fields.map(f => [f.name, initialValue(f)]));
    entered.set(key, values);
    while (entered.size > 200) {
      entered.delete(entered.keys().next().value as string);
    }
  }
  return values;
}

function control(
  field: IFormField,
  values: Record<string, FieldValue>,
  changed: () => void
): HTMLInputElement | HTMLSelectElement {
  const value = values[field.name];
  if (field.kind === 'choice') {
    const select = el('select', 'iac-form-select');
    const none = el('option', '', 'Choose…');
    none.value = '';
    select.appendChild(none);
    for (const choice of field.choices) {
      const option = el('option', '', choice);
      option.value = choice;
      select.appendChild(option);
    }
    select.value = typeof value === 'string' && field.choices.includes(value) ? value : '';
    select.addEventListener('change', () => {
      values[field.name] = readValue(field, select.value);
      changed();
    });
    return select;
  }
  const input = el('input', `iac-form-input iac-form-${field.kind}`);
  if (field.kind === 'boolean') {
    input.type = 'checkbox';
    input.checked = value === true;
    input.addEventListener('change', () => {
      values[field.name] = readValue(field, input.checked);
      changed();
    });
    return input;
  }
  input.type = field.kind === 'number' ? 'number' : 'text';
  input.value = value === null || value === undefined ? '' : String(value);
  input.placeholder = placeholderOf(field);
  input.autocomplete = 'off';
  input.spellcheck = false;
  input.addEventListener('input', () => {
    values[field.name] = readValue(field, input.value);
    changed();
  });
  return input;
}

/**
 * The fields of `form`, editing `values` in place. `changed` runs on every edit, `enter`
 * when Enter is pressed in a text or number field.
 */
export function renderFields(
  form: IForm,
  values: Record<string, FieldValue>,
  changed: () => void,
  enter: () => void
): HTMLElement {
  const box = el('fieldset', 'iac-form');
  if (form.title) {
    box.appendChild(el('legend', 'iac-form-title', form.title));
  }
  for (const field of form.fields) {
    const id = `iac-form-${++counter}`;
    const row = el('div', `iac-form-field iac-form-field-${field.kind}`);
    const input = control(field, values, changed);
    input.id = id;
    input.dataset.field = field.name;
    input.required = field.required;
    const label = el('label', 'iac-form-label', field.title);
    label.htmlFor = id;
    if (field.kind === 'boolean') {
      row.append(input, label);
    } else {
      row.append(label, input);
    }
    if (field.description) {
      const help = el('div', 'iac-form-help', field.description);
      help.id = `${id}-help`;
      input.setAttribute('aria-describedby', help.id);
      row.appendChild(help);
    }
    if (input instanceof HTMLInputElement && input.type !== 'checkbox') {
      input.addEventListener('keydown', event => {
        if (event.key === 'Enter' && !event.shiftKey) {
          event.preventDefault();
          event.stopPropagation();
          enter();
        }
      });
    }
    box.appendChild(row);
  }
  return box;
}

/** A question with a form (`id` is the key of what was entered). */
export type IFormQuestion = IQuestionBase & { form: IForm };

/**
 * The form of a pending question with its answer buttons, Reject first for a danger
 * question. Approving buttons are disabled while `formProblem` names a problem; Enter in
 * a field approves once the values answer the form. `send` absent: nobody can answer
 * from here (the buttons are disabled and the card says so).
 */
export function formQuestion(question: IFormQuestion, send?: SendAnswer): HTMLElement {
  const values = enteredValues(question.id, question.form);
  const box = el('div', `iac-question iac-toolcard-form${question.danger ? ' iac-question-danger' : ''}`);
  const status = el('div', 'iac-form-status');
  status.setAttribute('aria-live', 'polite');
  const order = answerOrder(question);
  const approves = order.filter(answersForm);
  const buttons = el('div', 'iac-form-buttons');
  const approving: HTMLButtonElement[] = [];
  let busy = false;

  const refresh = () => {
    const problem = formProblem(question.form, values);
    for (const button of approving) {
      button.disabled = busy || !send || problem !== null;
      button.title = problem ?? `${button.textContent}: send the form`;
    }
    const first = approving[0]?.textContent ?? '';
    const ready = first ? `Ready: Enter or ${first} sends it.` : 'Ready.';
    const blocked = blockedNote(question.form, values, first);
    status.textContent = send ? (blocked ?? ready) : 'This page cannot answer: no kernel channel.';
    box.dataset.ready = String(problem === null);
  };

  const answer = async (option: string) => {
    if (!send || busy) {
      return;
    }
    const approve = answersForm(option);
    if (approve && formProblem(question.form, values) !== null) {
      return;
    }
    busy = true;
    box.querySelectorAll('button').forEach(b => (b.disabled = true));
    status.textContent = 'Sending…';
    try {
      await send(option, undefined, approve ? { ...values } : undefined);
      status.textContent = approve ? 'Approved.' : 'Rejected.';
    } catch (error) {
      busy = false;
      box.querySelectorAll<HTMLButtonElement>('button').forEach(b => (b.disabled = false));
      refresh();
      status.textContent = `Not sent: ${error instanceof Error ? error.message : String(error)}`;
    }
  };

  const fields = renderFields(question.form, values, refresh, () => {
    if (approves.length > 0) {
      void answer(approves[0]);
    }
  });
  for (const option of order) {
    const button = el('button', `iac-form-button iac-form-${option}`, optionLabel(question, option));
    button.type = 'button';
    button.dataset.option = option;
    if (answersForm(option)) {
      approving.push(button);
      button.classList.add(question.danger ? 'iac-form-approve-danger' : 'iac-form-approve');
    } else {
      button.disabled = !send;
    }
    button.addEventListener('click', () => void answer(option));
    buttons.appendChild(button);
  }
  box.append(fields, buttons, status);
  refresh();
  return box;
}
