/**
 * The diff view of an edit card: a line diff (Myers' O((N+M)D) algorithm), unified hunks,
 * and their table with line numbers on both sides. Only `renderDiff` touches the DOM, so
 * the diff itself is unit tested under node.
 */

import { copyButton, el } from '../dom';
import type { IFileDiff } from './payload';

export type DiffOpType = 'equal' | 'delete' | 'insert';

export interface IDiffOp {
  type: DiffOpType;
  text: string;
  /** 1-based line number in the old text (equal and delete). */
  oldLine: number | null;
  /** 1-based line number in the new text (equal and insert). */
  newLine: number | null;
}

export interface IDiffResult {
  ops: IDiffOp[];
  added: number;
  removed: number;
  /** False when the edit distance passed the limit and the middle was shown as one replaced block. */
  exact: boolean;
  oldMissingEol: boolean;
  newMissingEol: boolean;
}

export interface IHunk {
  oldStart: number;
  oldCount: number;
  newStart: number;
  newCount: number;
  ops: IDiffOp[];
}

interface ISplit {
  lines: string[];
  missingEol: boolean;
}

/** Split into lines; a final "\n" ends the last line rather than starting an empty one. */
export function splitLines(text: string): ISplit {
  if (text === '') {
    return { lines: [], missingEol: false };
  }
  const lines = text.split('\n');
  const missingEol = lines[lines.length - 1] !== '';
  if (!missingEol) {
    lines.pop();
  }
  return { lines, missingEol };
}

/**
 * Shortest edit script between two sequences of line ids, or null when it
 * needs more than maxD edits. Returns op types in order.
 */
function myers(a: Int32Array, b: Int32Array, maxD: number): DiffOpType[] | null {
  const n = a.length;
  const m = b.length;
  const max = n + m;
  if (max === 0) {
    return [];
  }
  const off = max + 1;
  const v = new Int32Array(2 * max + 3);
  // trace[d] holds V for k in [-d-1, d+1] as it was before step d.
  const trace: Int32Array[] = [];
  let found = -1;
  const limit = Math.min(max, maxD);
  for (let d = 0; d <= limit && found < 0; d++) {
    trace.push(v.slice(off - d - 1, off + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let x =
        k === -d || (k !== d && v[off + k - 1] < v[off + k + 1])
          ? v[off + k + 1]
          : v[off + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[off + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
  }
  if (found < 0) {
    return null;
  }
  const reversed: DiffOpType[] = [];
  let x = n;
  let y = m;
  for (let d = found; d >= 0; d--) {
    const tv = trace[d];
    const at = (k: number) => tv[k + d + 1];
    const k = x - y;
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
    const prevX = at(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      reversed.push('equal');
      x--;
      y--;
    }
    if (d > 0) {
      reversed.push(x === prevX ? 'insert' : 'delete');
    }
    x = prevX;
    y = prevY;
  }
  return reversed.reverse();
}

/**
 * Diff two texts by line. oldText null means a new file.
 * maxEditDistance bounds time and memory (O(D^2) trace) on huge rewrites.
 */
export function diffLines(
  oldText: string | null,
  newText: string,
  maxEditDistance = 2000
): IDiffResult {
  const before = splitLines(oldText ?? '');
  const after = splitLines(newText);
  // A last line without "\n" differs from the same text with one, as in `diff -u`.
  const ids = new Map<string, number>();
  const intern = (split: ISplit): Int32Array => {
    const out = new Int32Array(split.lines.length);
    split.lines.forEach((line, i) => {
      const key = split.missingEol && i === split.lines.length - 1 ? `${line}\n\0eof` : line;
      let id = ids.get(key);
      if (id === undefined) {
        id = ids.size;
        ids.set(key, id);
      }
      out[i] = id;
    });
    return out;
  };
  const a = intern(before);
  const b = intern(after);

  let prefix = 0;
  while (prefix < a.length && prefix < b.length && a[prefix] === b[prefix]) {
    prefix++;
  }
  let suffix = 0;
  while (
    suffix < a.length - prefix &&
    suffix < b.length - prefix &&
    a[a.length - 1 - suffix] === b[b.length - 1 - suffix]
  ) {
    suffix++;
  }
  const midA = a.subarray(prefix, a.length - suffix);
  const midB = b.subarray(prefix, b.length - suffix);
  let middle = myers(midA, midB, maxEditDistance);
  const exact = middle !== null;
  if (middle === null) {
    middle = [
      ...new Array<DiffOpType>(midA.length).fill('delete'),
      ...new Array<DiffOpType>(midB.length).fill('insert')
    ];
  }
  const types: DiffOpType[] = [
    ...new Array<DiffOpType>(prefix).fill('equal'),
    ...middle,
    ...new Array<DiffOpType>(suffix).fill('equal')
  ];

  const ops: IDiffOp[] = [];
  let i = 0;
  let j = 0;
  let added = 0;
  let removed = 0;
  for (const type of types) {
    if (type === 'equal') {
      ops.push({ type, text: after.lines[j], oldLine: i + 1, newLine: j + 1 });
      i++;
      j++;
    } else if (type === 'delete') {
      ops.push({ type, text: before.lines[i], oldLine: i + 1, newLine: null });
      i++;
      removed++;
    } else {
      ops.push({ type, text: after.lines[j], oldLine: null, newLine: j + 1 });
      j++;
      added++;
    }
  }
  return {
    ops,
    added,
    removed,
    exact,
    oldMissingEol: before.missingEol,
    newMissingEol: after.missingEol
  };
}

/** Group ops into unified-diff hunks with `context` unchanged lines around each change. */
export function toHunks(ops: IDiffOp[], context = 3): IHunk[] {
  const changes: number[] = [];
  ops.forEach((op, index) => {
    if (op.type !== 'equal') {
      changes.push(index);
    }
  });
  const hunks: IHunk[] = [];
  let g = 0;
  while (g < changes.length) {
    const start = Math.max(0, changes[g] - context);
    let last = changes[g];
    while (g + 1 < changes.length && changes[g + 1] - last <= 2 * context + 1) {
      g++;
      last = changes[g];
    }
    const end = Math.min(ops.length, last + context + 1);
    const slice = ops.slice(start, end);
    hunks.push({
      oldStart: startLine(ops, start, end, 'oldLine'),
      oldCount: slice.filter(op => op.type !== 'insert').length,
      newStart: startLine(ops, start, end, 'newLine'),
      newCount: slice.filter(op => op.type !== 'delete').length,
      ops: slice
    });
    g++;
  }
  return hunks;
}

/** The line a hunk starts at on one side; for an empty side, the line before it (as `diff -u`). */
function startLine(
  ops: IDiffOp[],
  start: number,
  end: number,
  side: 'oldLine' | 'newLine'
): number {
  for (let index = start; index < end; index++) {
    const line = ops[index][side];
    if (line !== null) {
      return line;
    }
  }
  for (let index = start - 1; index >= 0; index--) {
    const line = ops[index][side];
    if (line !== null) {
      return line + 1;
    }
  }
  return 1;
}

/** `@@ -1,3 +1,4 @@`, the header of a hunk. */
export function hunkHeader(hunk: IHunk): string {
  const range = (start: number, count: number) =>
    count === 1 ? `${start}` : `${count === 0 ? start - 1 : start},${count}`;
  return `@@ -${range(hunk.oldStart, hunk.oldCount)} +${range(hunk.newStart, hunk.newCount)} @@`;
}

/** Diff lines rendered before the rest is summarised; keeps huge rewrites responsive. */
const MAX_DIFF_ROWS = 1500;

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
  head.appendChild(copyButton(() => diff.newText, `the new text of ${diff.path}`));
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

