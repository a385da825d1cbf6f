/**
 * DOM for one tool call card. All text goes in through textContent: payloads
 * carry file contents and command output, never markup.
 */

import { ICardOptions, el, section } from './cardbase';
import { outputSection, startClock, stopClock } from './cardoutput';
import { renderDiff } from './diffview';
import { withCopy } from './copy';
import { SendAnswer, formQuestion } from './formview';
import { IToolCall, TOOL_STATUSES, formatElapsed } from './payload';
import { SAVED_LABELS } from './stale';


export type { ICardOptions, ISectionState } from './cardbase';
export { renderDiff } from './diffview';

const STATUS_LABELS: Record<string, string> = {
  ...SAVED_LABELS,
  running: 'Running',
  awaiting_permission: 'Awaiting permission',
  done: 'Done',
  failed: 'Failed',
  denied: 'Denied',
  cancelled: 'Cancelled'
};

const STATUS_GLYPHS: Record<string, string> = {
  running: '',
  awaiting_permission: '?',
  done: '✓',
  failed: '✕',
  denied: '⊘',
  cancelled: '■'
};

/** The status in words: a call the user rejected when asked is "Rejected", one a rule or
 * the mode refused "Denied". */
export function statusLabel(call: IToolCall): string {
  if (call.status === 'denied' && (call.question?.answer ?? '').startsWith('reject')) {
    return 'Rejected';
  }
  return STATUS_LABELS[call.status] ?? call.status;
}

function statusClass(status: string): string {
  return (TOOL_STATUSES as readonly string[]).includes(status) ? status : 'unknown';
}

function header(call: IToolCall): HTMLDivElement {
  const status = statusClass(call.status);
  const head = el('div', 'iac-toolcard-header');
  const icon = el('span', `iac-toolcard-icon iac-status-${status}`, STATUS_GLYPHS[status] ?? '•');
  icon.setAttribute('aria-hidden', 'true');
  head.appendChild(icon);
  head.appendChild(el('span', `iac-toolcard-kind iac-kind-${call.kind}`, call.kind));
  const title = el('span', 'iac-toolcard-title', call.title);
  title.title = `${call.name} (${call.callId})`;
  head.appendChild(title);
  const label = el('span', `iac-toolcard-status iac-status-${status}`, statusLabel(call));
  label.setAttribute('role', 'status');
  head.appendChild(label);
  // Time spent waiting for an answer is not run time.
  if (call.elapsed !== null && status !== 'awaiting_permission') {
    const clock = el('span', 'iac-toolcard-elapsed', formatElapsed(call.elapsed));
    clock.title = status === 'running' ? 'Running for' : 'Ran for';
    head.appendChild(clock);
  }
  return head;
}

/**
 * The question a call asks, first on the card: the command and why. A per-call (danger)
 * question says plainly that it changes real infrastructure.
 */
function questionBlock(call: IToolCall, options: ICardOptions): HTMLElement | null {
  const question = call.question;
  if (question === null) {
    return null;
  }
  if (question.state === 'saved') {
    const box = el('div', 'iac-toolcard-saved-note', question.note ?? '');
    box.setAttribute('role', 'note');
    return box;
  }
  const waiting = call.status === 'awaiting_permission' && question.state !== 'cancelled';
  if (!waiting) {
    if (question.note && call.status === 'denied') {
      const box = el('div', 'iac-toolcard-rejected-note');
      box.appendChild(el('span', 'iac-toolcard-note-label', 'Rejected with a note: '));
      box.appendChild(el('q', 'iac-toolcard-note-text', question.note));
      return box;
    }
    return null;
  }
  const box = el('div', `iac-toolcard-question${question.danger ? ' iac-toolcard-question-danger' : ''}`);
  box.setAttribute('role', 'alert');
  box.appendChild(
    el(
      'div',
      'iac-toolcard-question-title',
      question.danger
        ? '⚠ Destructive: approve this one call only if you mean it'
        : question.kind === 'question'
          ? 'The agent asks you'
          : 'Needs your approval'
    )
  );
  const command = call.input.command;
  box.appendChild(
    el('pre', 'iac-toolcard-question-command', typeof command === 'string' ? `$ ${command}` : call.title)
  );
  if (question.reason) {
    box.appendChild(reasonLines(question.reason));
  }
  if (question.form) {
    const answer = options.answer;
    const send: SendAnswer | undefined = answer
      ? (option, note, values) => answer(question.id, option, note, values)
      : undefined;
    box.appendChild(formQuestion({ ...question, form: question.form }, send));
  }
  return box;
}

/** A plan row of a reason: `-/+ replace module.a.x (why)`. */
const PLAN_LINE = /^(?:-\/\+|-|\+|~|<=|\.) (replace|delete|update|create|read|forget) /;

/** The reason, one line per line (a plan summary reads as a list, not one paragraph). */
function reasonLines(reason: string): HTMLElement {
  const box = el('div', 'iac-toolcard-question-why');
  for (const line of reason.split('\n')) {
    const item = el('div', 'iac-toolcard-question-line', line);
    const plan = PLAN_LINE.exec(line);
    if (plan) {
      item.dataset.action = plan[1];
    }
    box.appendChild(item);
  }
  return box;
}

function locations(call: IToolCall, options: ICardOptions): HTMLDivElement | null {
  if (call.locations.length === 0) {
    return null;
  }
  const box = el('div', 'iac-toolcard-locations');
  for (const location of call.locations.slice(0, 20)) {
    const link = el('a', 'iac-toolcard-location', location);
    link.href = '#';
    link.title = options.openLocation ? `Open ${location}` : location;
    link.addEventListener('click', event => {
      event.preventDefault();
      options.openLocation?.(location);
    });
    box.appendChild(link);
  }
  if (call.locations.length > 20) {
    box.appendChild(el('span', 'iac-toolcard-more', `+${call.locations.length - 20} more`));
  }
  return box;
}

function inputSection(call: IToolCall, options: ICardOptions): HTMLElement | null {
  const keys = Object.keys(call.input);
  if (keys.length === 0) {
    return null;
  }
  // The user decides on a command by reading it: show the input while asked (unless the
  // question block above already shows the command).
  const asked = call.status === 'awaiting_permission';
  // A question with a form shows what it asks in the form: its input stays folded.
  const commandShown =
    asked && call.question !== null && (typeof call.input.command === 'string' || call.question.form !== null);
  const { details, body } = section(
    'input',
    'Input',
    asked && call.kind !== 'edit' && !commandShown,
    options
  );
  const command = call.input.command;
  if (typeof command === 'string') {
    body.appendChild(
      withCopy(el('pre', 'iac-toolcard-command', `$ ${command}`), () => command, 'the command')
    );
  }
  // One row per argument; strings verbatim (a file's content reads as a file, not as JSON).
  const table = el('table', 'iac-toolcard-args');
  for (const key of keys) {
    if (key === 'command' && typeof command === 'string') {
      continue;
    }
    const value = call.input[key];
    const row = el('tr');
    row.appendChild(el('th', 'iac-toolcard-arg-name', key));
    const cell = el('td');
    let text: string;
    if (typeof value === 'string') {
      text = value;
    } else {
      try {
        text = JSON.stringify(value, null, 2) ?? String(value);
      } catch {
        text = String(value);
      }
    }
    cell.appendChild(el('pre', 'iac-toolcard-pre iac-toolcard-arg-value', text));
    row.appendChild(cell);
    table.appendChild(row);
  }
  if (table.childElementCount > 0) {
    body.appendChild(table);
  }
  return details;
}

/** Replace host's content with the card for call. Safe to call again on every update. */
export function renderToolCard(host: HTMLElement, call: IToolCall, options: ICardOptions): void {
  const status = statusClass(call.status);
  stopClock(host);
  host.replaceChildren();
  host.classList.add('iac-toolcard');
  // A destructive call is drawn as one until it ran: after a successful apply the card
  // shows the success state, not the red border of the question.
  host.classList.toggle('iac-toolcard-danger', call.question?.danger === true && call.status !== 'done');
  for (const name of [...host.classList]) {
    if (name.startsWith('iac-toolcard-is-')) {
      host.classList.remove(name);
    }
  }
  host.classList.add(`iac-toolcard-is-${status}`);
  host.dataset.callId = call.callId;
  host.dataset.status = call.status;
  host.dataset.kind = call.kind;

  host.appendChild(header(call));
  // A re-render keeps the focus in the form field the user is typing in.
  const active = host.ownerDocument.activeElement;
  const focused = active instanceof HTMLElement && host.contains(active) ? active.dataset.field : undefined;
  const question = questionBlock(call, options);
  if (question) {
    host.appendChild(question);
  }
  const where = locations(call, options);
  if (where) {
    host.appendChild(where);
  }
  if (call.diff) {
    // A rejected (or cancelled) edit changed nothing: its diff starts folded.
    const applied = call.status !== 'denied' && call.status !== 'cancelled';
    const { details, body } = section('diff', applied ? 'Changes' : 'Proposed changes (not applied)', applied, options);
    body.appendChild(renderDiff(call.diff));
    host.appendChild(details);
  }
  for (const part of [inputSection(call, options), outputSection(call, options)]) {
    if (part) {
      host.appendChild(part);
    }
  }
  if (call.status === 'awaiting_permission') {
    const where = call.question?.form ? 'in the form above' : 'below';
    host.appendChild(el('div', 'iac-toolcard-note iac-toolcard-ask', `Waiting for your answer ${where}.`));
  }
  for (const warning of options.warnings ?? []) {
    host.appendChild(el('div', 'iac-toolcard-warning', `Payload: ${warning}`));
  }
  if (focused) {
    host.querySelector<HTMLElement>(`[data-field="${CSS.escape(focused)}"]`)?.focus();
  }
  startClock(host, call);
}

/** Shown instead of a card when the payload cannot be read at all. */
export function renderInvalid(host: HTMLElement, error: string, raw: unknown): void {
  host.replaceChildren();
  host.classList.add('iac-toolcard', 'iac-toolcard-invalid');
  host.dataset.status = 'invalid';
  host.appendChild(el('div', 'iac-toolcard-warning', `Unreadable iac-kernel tool call: ${error}`));
  let text: string;
  try {
    text = JSON.stringify(raw, null, 2) ?? String(raw);
  } catch {
    text = String(raw);
  }
  host.appendChild(el('pre', 'iac-toolcard-pre', text.slice(0, 20_000)));
}
