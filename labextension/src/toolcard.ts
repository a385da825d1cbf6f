/**
 * DOM for one tool call card. All text goes in through textContent: payloads
 * carry file contents and command output, never markup.
 */

import { diffLines, hunkHeader, IDiffOp, toHunks } from './diff';
import {
  IFileDiff,
  IToolCall,
  TOOL_STATUSES,
  countLines,
  formatCount,
  formatElapsed,
  hiddenNote
} from './payload';

/** Which sections the user opened or closed; kept across re-renders of a card. */
export interface ISectionState {
  input?: boolean;
  output?: boolean;
  diff?: boolean;
  /** The whole output, once the user asked for it. */
  fullText?: string;
}

export interface ICardOptions {
  /** Remembered open/closed sections, updated when the user toggles one. */
  sections: ISectionState;
  /** Opens a location (path, optionally "path:line") in the app, if it can. */
  openLocation?: (location: string) => boolean;
  /** Parser warnings to show at the bottom of the card. */
  warnings?: string[];
  /** Fetches a call's whole output from the kernel (absent: no "Show full output" button). */
  fullOutput?: (callId: string) => Promise<string>;
}

const STATUS_LABELS: Record<string, string> = {
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

/** Diff lines rendered before the rest is summarised; keeps huge rewrites responsive. */
const MAX_DIFF_ROWS = 1500;
/** Output shown open by default up to this many lines. */
const SHORT_OUTPUT_LINES = 12;

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function statusClass(status: string): string {
  return (TOOL_STATUSES as readonly string[]).includes(status) ? status : 'unknown';
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
  const label = el(
    'span',
    `iac-toolcard-status iac-status-${status}`,
    STATUS_LABELS[call.status] ?? call.status
  );
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
 * The question a call asks, first on the card: the command and why. A per-call (danger)
 * question says plainly that it changes real infrastructure.
 */
function questionBlock(call: IToolCall): HTMLElement | null {
  const question = call.question;
  if (question === null) {
    return null;
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
        : 'Needs your approval'
    )
  );
  const command = call.input.command;
  box.appendChild(
    el('pre', 'iac-toolcard-question-command', typeof command === 'string' ? `$ ${command}` : call.title)
  );
  if (question.reason) {
    box.appendChild(el('div', 'iac-toolcard-question-why', question.reason));
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
  const commandShown = asked && call.question !== null && typeof call.input.command === 'string';
  const { details, body } = section(
    'input',
    'Input',
    asked && call.kind !== 'edit' && !commandShown,
    options
  );
  const command = call.input.command;
  if (typeof command === 'string') {
    body.appendChild(el('pre', 'iac-toolcard-command', `$ ${command}`));
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
  const label = running ? 'Output so far' : 'Output';
  const summary = `${label} (${formatCount(lines)} line${lines === 1 ? '' : 's'}${cut ? ', part hidden' : ''})`;
  const { details, body } = section(
    'output',
    summary,
    call.status === 'failed' || call.status === 'denied' || running || lines <= SHORT_OUTPUT_LINES,
    options
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
    body.appendChild(pre(call.outputHead));
    body.appendChild(el('div', 'iac-toolcard-hidden-marker', `⋯ ${note ?? 'part hidden'} ⋯`));
    body.appendChild(pre(call.outputTail));
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

function diffRow(op: IDiffOp): HTMLTableRowElement {
  const row = el('tr', `iac-diff-line iac-diff-${op.type}`);
  row.appendChild(el('td', 'iac-diff-num', op.oldLine === null ? '' : String(op.oldLine)));
  row.appendChild(el('td', 'iac-diff-num', op.newLine === null ? '' : String(op.newLine)));
  const sign = op.type === 'insert' ? '+' : op.type === 'delete' ? '-' : ' ';
  row.appendChild(el('td', 'iac-diff-sign', sign));
  row.appendChild(el('td', 'iac-diff-text', op.text));
  return row;
}

/** A unified diff view with line numbers, rendered as a table. */
export function renderDiff(diff: IFileDiff): HTMLDivElement {
  const view = el('div', 'iac-diff');
  const result = diffLines(diff.oldText, diff.newText);
  const head = el('div', 'iac-diff-header');
  head.appendChild(el('span', 'iac-diff-path', diff.path));
  if (diff.oldText === null) {
    head.appendChild(el('span', 'iac-diff-badge', 'new file'));
  }
  head.appendChild(el('span', 'iac-diff-added', `+${result.added}`));
  head.appendChild(el('span', 'iac-diff-removed', `−${result.removed}`));
  view.appendChild(head);

  if (result.added === 0 && result.removed === 0) {
    view.appendChild(el('div', 'iac-toolcard-note', 'No changes.'));
    return view;
  }
  if (!result.exact) {
    view.appendChild(
      el('div', 'iac-toolcard-note', 'Large rewrite: shown as one replaced block.')
    );
  }
  const table = el('table', 'iac-diff-table');
  const tbody = el('tbody');
  table.appendChild(tbody);
  let rows = 0;
  let hidden = 0;
  for (const hunk of toHunks(result.ops)) {
    if (rows >= MAX_DIFF_ROWS) {
      hidden += hunk.ops.length;
      continue;
    }
    const hunkRow = el('tr', 'iac-diff-hunk');
    const cell = el('td', undefined, hunkHeader(hunk));
    cell.colSpan = 4;
    hunkRow.appendChild(cell);
    tbody.appendChild(hunkRow);
    for (const op of hunk.ops) {
      if (rows >= MAX_DIFF_ROWS) {
        hidden++;
        continue;
      }
      tbody.appendChild(diffRow(op));
      rows++;
    }
  }
  view.appendChild(table);
  if (hidden > 0) {
    view.appendChild(el('div', 'iac-toolcard-note', `${hidden} more diff lines not shown.`));
  }
  if (result.oldMissingEol !== result.newMissingEol) {
    view.appendChild(
      el(
        'div',
        'iac-toolcard-note',
        result.newMissingEol ? 'No newline at end of new file.' : 'Newline added at end of file.'
      )
    );
  }
  return view;
}

/** Replace host's content with the card for call. Safe to call again on every update. */
export function renderToolCard(host: HTMLElement, call: IToolCall, options: ICardOptions): void {
  const status = statusClass(call.status);
  stopClock(host);
  host.replaceChildren();
  host.classList.add('iac-toolcard');
  host.classList.toggle('iac-toolcard-danger', call.question?.danger === true);
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
  const question = questionBlock(call);
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
    host.appendChild(
      el('div', 'iac-toolcard-note iac-toolcard-ask', 'Waiting for your answer below.')
    );
  }
  for (const warning of options.warnings ?? []) {
    host.appendChild(el('div', 'iac-toolcard-warning', `Payload: ${warning}`));
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
