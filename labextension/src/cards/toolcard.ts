/**
 * One tool call card: the renderer of `application/vnd.iac-kernel.toolcall+json`, and the
 * card's DOM (header, question, locations, diff, input, output with its live clock and
 * "Show full output"). All text goes in through textContent: payloads carry file contents
 * and command output, never markup.
 */

import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { copyButton, el, withCopy } from '../dom';
import { SendAnswer, formQuestion } from '../questions/form';
import { AnswerQuestion } from '../questions/model';
import { renderDiff } from './diff';
import { countLines, formatCount, formatElapsed, hiddenNote } from './format';
import { ISectionState, appHooks, sectionState } from './hooks';
import { IToolCall, TOOL_STATUSES, ToolStatus, parseToolCall } from './payload';
import { SAVED_LABELS } from './stale';

export interface ICardOptions {
  /** Remembered open/closed sections, updated when the user toggles one. */
  sections: ISectionState;
  /** Opens a location (path, optionally "path:line") in the app, if it can. */
  openLocation?: (location: string) => boolean;
  /** Parser warnings to show at the bottom of the card. */
  warnings?: string[];
  /** Answers the call's pending question on the kernel's status channel (absent: the
   * card cannot answer; a question with a form then says so). */
  answer?: AnswerQuestion;
  /** Fetches a call's whole output from the kernel (absent: no "Show full output" button). */
  fullOutput?: (callId: string) => Promise<string>;
}

/** A <details> section whose open state survives re-rendering. */
type SectionName = 'input' | 'output' | 'diff';

function section(
  name: SectionName,
  summary: string,
  defaultOpen: boolean,
  options: ICardOptions
): { details: HTMLDetailsElement; body: HTMLDivElement } {
  const details = el('details', `iac-toolcard-section iac-toolcard-${name}`);
  details.dataset.section = name;
  details.open = options.sections[name] ?? defaultOpen;
  // Remember only the user's own toggles: a 'toggle' event also fires for the default
  // state set above, and remembering that would keep a rejected edit's diff open.
  const head = el('summary', 'iac-toolcard-summary', summary);
  head.addEventListener('click', () => {
    options.sections[name] = !details.open;
  });
  details.appendChild(head);
  const body = el('div', 'iac-toolcard-body');
  details.appendChild(body);
  return { details, body };
}

/** Output shown open by default up to this many lines. */
const SHORT_OUTPUT_LINES = 12;

/** Ticking clocks of running cards, so a re-render or a detached card stops its timer. */
const clocks = new WeakMap<HTMLElement, number>();

function stopClock(host: HTMLElement): void {
  const timer = clocks.get(host);
  if (timer !== undefined) {
    clearInterval(timer);
    clocks.delete(host);
  }
}

/** Count up from the kernel's elapsed time, on the browser's clock (no clock skew). */
function startClock(host: HTMLElement, call: IToolCall): void {
  const clock = host.querySelector<HTMLElement>('.iac-toolcard-elapsed');
  if (!clock || call.elapsed === null || call.status !== 'running') {
    return;
  }
  const base = call.elapsed;
  const since = Date.now();
  clocks.set(
    host,
    window.setInterval(() => {
      if (!host.isConnected && clocks.has(host)) {
        stopClock(host);
        return;
      }
      clock.textContent = formatElapsed(base + (Date.now() - since) / 1000);
    }, 1000)
  );
}

/**
 * A new card started below: outputs left open only because the reader watched them live
 * fold now (an output the reader opened or closed keeps the reader's choice).
 */
function foldWatchedOutputs(
  cards: Iterable<HTMLElement>,
  state: (callId: string) => ISectionState
): void {
  for (const card of cards) {
    const callId = card.dataset.callId;
    const sections = callId ? state(callId) : undefined;
    if (!sections?.shownLive || sections.output !== undefined || card.dataset.status === 'running') {
      continue;
    }
    sections.shownLive = false;
    const details = card.querySelector<HTMLDetailsElement>('details[data-section="output"]');
    if (details) {
      details.open = false;
    }
  }
}

function fullOutputNote(text: string): string {
  const lines = countLines(text);
  return `Full output: ${formatCount(lines)} line${lines === 1 ? '' : 's'}, as the agent saw it.`;
}

function outputSection(call: IToolCall, options: ICardOptions): HTMLElement | null {
  if (call.output === null) {
    return null;
  }
  const full = options.sections.fullText;
  const cut = call.outputTruncated && full === undefined;
  // The kernel counts the whole output; without its count, count what we have.
  const lines = full !== undefined ? countLines(full) : call.outputLines ?? countLines(call.output);
  const running = call.status === 'running';
  if (running) {
    // What the reader watched stays open after the command ends (until they fold it).
    options.sections.shownLive = true;
  }
  const label = running ? 'Output so far' : 'Output';
  const summary = `${label} (${formatCount(lines)} line${lines === 1 ? '' : 's'}${cut ? ', part hidden' : ''})`;
  const { details, body } = section(
    'output',
    summary,
    call.status === 'failed' ||
      call.status === 'denied' ||
      running ||
      options.sections.shownLive === true ||
      lines <= SHORT_OUTPUT_LINES,
    options
  );
  body.classList.add('iac-copyable');
  body.appendChild(
    copyButton(() => options.sections.fullText ?? call.output ?? '', 'the output (as shown)')
  );
  const errorClass = call.status === 'failed' ? ' iac-toolcard-error' : '';
  const pre = (text: string) => el('pre', `iac-toolcard-pre iac-toolcard-output-text${errorClass}`, text);
  if (full !== undefined) {
    body.appendChild(pre(full));
    body.appendChild(el('div', 'iac-toolcard-note iac-toolcard-full-note', fullOutputNote(full)));
    return details;
  }
  const note = hiddenNote(call);
  if (cut && call.outputHead !== null && call.outputTail !== null) {
    // One scroll box for head, marker and tail (not one per part).
    const scroll = el('div', 'iac-toolcard-scroll');
    scroll.appendChild(pre(call.outputHead));
    scroll.appendChild(el('div', 'iac-toolcard-hidden-marker', `⋯ ${note ?? 'part hidden'} ⋯`));
    scroll.appendChild(pre(call.outputTail));
    body.appendChild(scroll);
  } else {
    body.appendChild(pre(call.output));
  }
  if (cut) {
    const footer = el('div', 'iac-toolcard-output-footer');
    footer.appendChild(el('span', 'iac-toolcard-note iac-toolcard-hidden-note', `${note}.`));
    if (options.fullOutput && !running) {
      footer.appendChild(fullOutputButton(call, options, body));
    }
    body.appendChild(footer);
  }
  return details;
}

function fullOutputButton(call: IToolCall, options: ICardOptions, body: HTMLElement): HTMLElement {
  const button = el('button', 'iac-toolcard-full-button', 'Show full output');
  button.type = 'button';
  button.title = 'Fetch the whole output of this call from the kernel';
  button.addEventListener('click', () => {
    button.disabled = true;
    button.textContent = 'Loading…';
    options.fullOutput!(call.callId).then(
      text => {
        options.sections.fullText = text;
        options.sections.output = true;
        const errorClass = call.status === 'failed' ? ' iac-toolcard-error' : '';
        body.replaceChildren(
          copyButton(() => text, 'the whole output'),
          el('pre', `iac-toolcard-pre iac-toolcard-output-text${errorClass}`, text),
          el('div', 'iac-toolcard-note iac-toolcard-full-note', fullOutputNote(text))
        );
        const summary = body.parentElement?.querySelector('summary');
        if (summary) {
          const lines = countLines(text);
          summary.textContent = `Output (${formatCount(lines)} line${lines === 1 ? '' : 's'})`;
        }
      },
      (error: unknown) => {
        button.disabled = false;
        button.textContent = 'Show full output';
        const message = error instanceof Error ? error.message : String(error);
        body.appendChild(el('div', 'iac-toolcard-warning', `Could not fetch the full output: ${message}`));
      }
    );
  });
  return button;
}

const STATUS_LABELS: Record<ToolStatus | keyof typeof SAVED_LABELS, string> = {
  ...SAVED_LABELS,
  running: 'Running',
  awaiting_permission: 'Awaiting permission',
  done: 'Done',
  failed: 'Failed',
  denied: 'Denied',
  cancelled: 'Cancelled'
};

const STATUS_GLYPHS: Record<ToolStatus, string> = {
  running: '',
  awaiting_permission: '?',
  done: '✓',
  failed: '✕',
  denied: '⊘',
  cancelled: '■'
};

/** The status in words: a call the user rejected when asked is "Rejected", one a rule or
 * the mode refused "Denied". */
function statusLabel(call: IToolCall): string {
  if (call.status === 'denied' && (call.question?.answer ?? '').startsWith('reject')) {
    return 'Rejected';
  }
  return STATUS_LABELS[call.status as keyof typeof STATUS_LABELS] ?? call.status;
}

function statusClass(status: string): ToolStatus | 'unknown' {
  return (TOOL_STATUSES as string[]).includes(status) ? (status as ToolStatus) : 'unknown';
}

function header(call: IToolCall): HTMLDivElement {
  const status = statusClass(call.status);
  const head = el('div', 'iac-toolcard-header');
  const glyph = status === 'unknown' ? '•' : STATUS_GLYPHS[status];
  const icon = el('span', `iac-toolcard-icon iac-status-${status}`, glyph);
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

/** The reason, one line per line (an apply's plan summary reads as lines, not one
 * paragraph; its rows are the plan card's). */
function reasonLines(reason: string): HTMLElement {
  const box = el('div', 'iac-toolcard-question-why');
  for (const line of reason.split('\n')) {
    box.appendChild(el('div', 'iac-toolcard-question-line', line));
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

/**
 * Renders a tool call card. JupyterLab calls renderModel again on the same
 * instance for every update_display_data of the card's display_id.
 */
export class ToolCallRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(private _options: IRenderMime.IRendererOptions) {
    super();
    this.addClass('iac-toolcard-widget');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const raw = model.data[this._options.mimeType];
    const parsed = parseToolCall(raw);
    if (!parsed.ok) {
      renderInvalid(this.node, parsed.error, raw);
      return;
    }
    renderToolCard(this.node, parsed.value, {
      sections: sectionState(parsed.value.callId),
      openLocation: location => appHooks.openLocation?.(location) ?? false,
      warnings: parsed.warnings,
      answer: appHooks.answer
        ? (...answer) => appHooks.answer!(this.node, ...answer)
        : undefined,
      fullOutput: appHooks.fullOutput
        ? callId => appHooks.fullOutput!(callId, this.node)
        : undefined
    });
  }

  /** A card that starts folds the outputs earlier cards of the cell kept open. */
  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    const area = this.node.closest('.jp-OutputArea');
    if (area) {
      const earlier = [...area.querySelectorAll<HTMLElement>('.iac-toolcard-widget')].filter(
        card => card.compareDocumentPosition(this.node) & Node.DOCUMENT_POSITION_FOLLOWING
      );
      foldWatchedOutputs(earlier, sectionState);
    }
  }
}
