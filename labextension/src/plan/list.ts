/**
 * The plan card's review list: filter buttons by action, a search box for address text,
 * and a virtualised list of group headers and rows (only the rows in view are in the
 * DOM, so a 10,000-resource plan renders at once). A row's address opens its attribute
 * diff in place. Text goes in through textContent only.
 */

import { copyButton, el } from '../dom';
import {
  COLORS,
  DANGER,
  Entry,
  IRow,
  SYMBOLS,
  countsOf,
  entriesOf,
  filterRows,
  groupLabel,
  rowsText
} from './model';

/** Heights in px (fixed, so a row's place is known without measuring it). */
const ROW = 24;
const HEADER = 26;
const DIFF_LINE = 17;
const DIFF_LINES = 16;
/** The list's scroll box is at most this tall. */
const VIEW = 420;
/** Rows drawn above and below the visible ones. */
const OVERSCAN = 8;

/** Asks the kernel for a row's attribute diff (null: it has none). */
export type FetchDiff = (address: string) => Promise<string[] | null>;

const NOT_IN_CARD = '(not in this card: `terraform show` of the plan file lists it)';

export class PlanList {
  /** The toolbar, the list and the copy button, in one box. */
  readonly node = el('div', 'iac-plan-review');

  constructor(
    rows: IRow[],
    checks: Map<string, string[]>,
    note: string,
    fetchDiff?: FetchDiff
  ) {
    this._rows = rows;
    this._checks = checks;
    this._fetchDiff = fetchDiff;
    this.node.appendChild(this._toolbar());
    if (note) {
      this.node.appendChild(el('div', 'iac-plan-more', note));
    }
    this._scroller.setAttribute('role', 'list');
    this._scroller.setAttribute('aria-label', 'Changing resources');
    this._scroller.tabIndex = 0;
    this._scroller.appendChild(this._spacer);
    this._scroller.addEventListener('scroll', () => this._schedule());
    const box = el('div', 'iac-copyable iac-plan-list-box');
    box.append(this._scroller, copyButton(() => rowsText(this._shown), 'the plan table'));
    this.node.appendChild(box);
    this._apply();
  }

  /** The rows shown now (after the filter and the search). */
  get shown(): IRow[] {
    return this._shown;
  }

  private _toolbar(): HTMLElement {
    const bar = el('div', 'iac-plan-toolbar');
    const counts = countsOf(this._rows);
    const all = el('button', 'iac-plan-filter', `All ${this._rows.length}`);
    all.dataset.action = '';
    bar.appendChild(all);
    for (const [action, count] of counts) {
      const button = el('button', 'iac-plan-filter', `${SYMBOLS[action] ?? '?'} ${action} ${count}`);
      button.dataset.action = action;
      if (DANGER.has(action)) {
        button.classList.add('iac-plan-filter-danger');
      }
      bar.appendChild(button);
    }
    for (const button of bar.querySelectorAll<HTMLButtonElement>('button')) {
      button.type = 'button';
      button.setAttribute('aria-pressed', String(button === all));
      button.addEventListener('click', () => {
        const action = button.dataset.action ?? '';
        if (action === '') {
          this._actions.clear();
        } else if (this._actions.has(action)) {
          this._actions.delete(action);
        } else {
          this._actions.add(action);
        }
        for (const other of bar.querySelectorAll<HTMLButtonElement>('button')) {
          const a = other.dataset.action ?? '';
          const on = a === '' ? this._actions.size === 0 : this._actions.has(a);
          other.setAttribute('aria-pressed', String(on));
        }
        this._apply();
      });
    }
    const search = el('input', 'iac-plan-search');
    search.type = 'search';
    search.placeholder = 'Search addresses';
    search.setAttribute('aria-label', 'Search the plan by address');
    search.addEventListener('input', () => {
      this._query = search.value;
      this._apply();
    });
    bar.appendChild(search);
    bar.appendChild(this._status);
    return bar;
  }

  /** Filter, group and lay out again (after a filter or search change). */
  private _apply(): void {
    this._shown = filterRows(this._rows, this._actions, this._query);
    this._entries = entriesOf(this._shown);
    const total = this._rows.length;
    this._status.textContent =
      this._shown.length === total ? `${total} rows` : `${this._shown.length} of ${total} rows`;
    this._layout();
    this._scroller.scrollTop = 0;
    this._paint();
  }

  private _height(entry: Entry): number {
    if (entry.kind === 'group') {
      return HEADER;
    }
    if (!this._open.has(entry.row.address)) {
      return ROW;
    }
    const lines = Math.min(Math.max(entry.row.diff?.length ?? 1, 1), DIFF_LINES);
    return ROW + lines * DIFF_LINE + 10;
  }

  /** Each entry's top, and the list's height. */
  private _layout(): void {
    const tops = new Float64Array(this._entries.length + 1);
    for (let i = 0; i < this._entries.length; i++) {
      tops[i + 1] = tops[i] + this._height(this._entries[i]);
    }
    this._tops = tops;
    const height = tops[this._entries.length];
    this._spacer.style.height = `${height}px`;
    this._scroller.style.height = `${Math.min(height, VIEW) + 2}px`;
  }

  private _schedule(): void {
    if (!this._queued) {
      this._queued = true;
      requestAnimationFrame(() => {
        this._queued = false;
        this._paint();
      });
    }
  }

  /** The first entry whose bottom is below y. */
  private _index(y: number): number {
    let lo = 0;
    let hi = this._entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this._tops[mid + 1] <= y) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  /** Draw the entries in view (and a few around them); nothing else is in the DOM. */
  private _paint(): void {
    const top = this._scroller.scrollTop;
    const view = this._scroller.clientHeight || VIEW;
    const first = Math.max(this._index(top) - OVERSCAN, 0);
    const last = Math.min(this._index(top + view) + OVERSCAN, this._entries.length - 1);
    const nodes: HTMLElement[] = [];
    for (let i = first; i <= last; i++) {
      const node = this._entryNode(this._entries[i]);
      node.style.top = `${this._tops[i]}px`;
      node.style.height = `${this._tops[i + 1] - this._tops[i]}px`;
      nodes.push(node);
    }
    this._spacer.replaceChildren(...nodes);
  }

  private _entryNode(entry: Entry): HTMLElement {
    if (entry.kind === 'group') {
      const head = el('div', 'iac-plan-vgroup', groupLabel(entry));
      head.dataset.action = entry.action;
      head.setAttribute('role', 'heading');
      head.setAttribute('aria-level', '4');
      return head;
    }
    const row = entry.row;
    const node = el('div', `iac-plan-vrow iac-plan-${row.action}`);
    node.setAttribute('role', 'listitem');
    node.dataset.action = row.action;
    node.dataset.address = row.address;
    const [background, color] = COLORS[row.action] ?? ['transparent', 'inherit'];
    node.style.background = background;
    const line = el('div', 'iac-plan-vline');
    const action = el('span', 'iac-plan-action', `${SYMBOLS[row.action] ?? '?'} ${row.action}`);
    action.style.color = color;
    if (DANGER.has(row.action)) {
      node.classList.add('iac-plan-danger');
    }
    const opened = this._open.has(row.address);
    const address = el('button', 'iac-plan-address', row.address);
    address.type = 'button';
    address.title = row.address;
    address.setAttribute('aria-expanded', String(opened));
    address.addEventListener('click', () => this._toggle(row.address));
    const flags = this._checks.get(row.address) ?? [];
    const reason = el('span', 'iac-plan-reason', row.why);
    reason.title = row.why;
    line.append(action, address);
    for (const flag of flags) {
      line.appendChild(el('span', 'iac-plan-check', `✗ ${flag}`));
    }
    line.appendChild(reason);
    node.appendChild(line);
    if (opened) {
      const text =
        row.diff !== null
          ? row.diff.join('\n') || '(no attribute changes)'
          : this._asking.has(row.address)
            ? '(asking the kernel…)'
            : NOT_IN_CARD;
      node.appendChild(el('pre', 'iac-plan-diff', text));
    }
    return node;
  }

  /** A row's diff the card left out, from the kernel (once; the row keeps it). */
  private _ask(row: IRow): void {
    if (row.diff !== null || !this._fetchDiff || this._asking.has(row.address)) {
      return;
    }
    this._asking.add(row.address);
    const done = (diff: string[] | null) => {
      this._asking.delete(row.address);
      if (diff !== null) {
        row.diff = diff;
      }
      this._layout();
      this._paint();
    };
    this._fetchDiff(row.address).then(done, () => done(null));
  }

  private _toggle(address: string): void {
    if (this._open.has(address)) {
      this._open.delete(address);
    } else {
      this._open.add(address);
      const row = this._shown.find(r => r.address === address);
      if (row) {
        this._ask(row);
      }
    }
    this._layout();
    this._paint();
    const button = this._spacer.querySelector<HTMLButtonElement>(
      `.iac-plan-vrow[data-address="${CSS.escape(address)}"] .iac-plan-address`
    );
    button?.focus();
  }

  private _rows: IRow[];
  private _checks: Map<string, string[]>;
  private _fetchDiff: FetchDiff | undefined;
  private _asking = new Set<string>();
  private _shown: IRow[] = [];
  private _entries: Entry[] = [];
  private _tops = new Float64Array(1);
  private _actions = new Set<string>();
  private _query = '';
  private _open = new Set<string>();
  private _queued = false;
  private _status = el('span', 'iac-plan-status');
  private _scroller = el('div', 'iac-plan-list');
  private _spacer = el('div', 'iac-plan-spacer');
}
