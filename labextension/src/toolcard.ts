/**
 * DOM for one tool call card. All text goes in through textContent: payloads
 * carry file contents and command output, never markup.
 */

import { diffLines, hunkHeader, IDiffOp, toHunks } from './diff';
import { IFileDiff, IToolCall, TOOL_STATUSES } from './payload';

/** Which sections the user opened or closed; kept across re-renders of a card. */
export interface ISectionState {
  input?: boolean;
  output?: boolean;
  diff?: boolean;
}

export interface ICardOptions {
  /** Remembered open/closed sections, updated when the user toggles one. */
  sections: ISectionState;
  /** Opens a location (path, optionally "path:line") in the app, if it can. */
  openLocation?: (location: string) => boolean;
  /** Parser warnings to show at the bottom of the card. */
  warnings?: string[];
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
function section(
  name: keyof ISectionState,
  summary: string,
  defaultOpen: boolean,
  options: ICardOptions
): { details: HTMLDetailsElement; body: HTMLDivElement } {
  const details = el('details', `iac-toolcard-section iac-toolcard-${name}`);
  details.dataset.section = name;
  details.open = options.sections[name] ?? defaultOpen;
  details.addEventListener('toggle', () => {
    options.sections[name] = details.open;
  });
  details.appendChild(el('summary', 'iac-toolcard-summary', summary));
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
  return head;
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
  // The user decides on a command by reading it: show the input while asked.
  const { details, body } = section(
    'input',
    'Input',
    call.status === 'awaiting_permission' && call.kind !== 'edit',
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

function outputSection(call: IToolCall, options: ICardOptions): HTMLElement | null {
  if (call.output === null) {
    return null;
  }
  const lines = call.output.split('\n').length;
  const summary = `Output (${lines} line${lines === 1 ? '' : 's'}${call.outputTruncated ? ', truncated' : ''})`;
  const { details, body } = section(
    'output',
    summary,
    call.status === 'failed' || call.status === 'denied' || lines <= SHORT_OUTPUT_LINES,
    options
  );
  const pre = el('pre', 'iac-toolcard-pre iac-toolcard-output-text', call.output);
  if (call.status === 'failed') {
    pre.classList.add('iac-toolcard-error');
  }
  body.appendChild(pre);
  if (call.outputTruncated) {
    body.appendChild(
      el('div', 'iac-toolcard-note', 'Output truncated by the kernel; the model saw the same text.')
    );
  }
  return details;
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
  host.replaceChildren();
  host.classList.add('iac-toolcard');
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
  const where = locations(call, options);
  if (where) {
    host.appendChild(where);
  }
  if (call.diff) {
    const { details, body } = section('diff', 'Changes', true, options);
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
