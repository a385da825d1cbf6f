/**
 * The diff view of an edit card: unified hunks with line numbers on both sides.
 */

import { copyButton } from './copy';
import { el } from './cardbase';
import { diffLines, hunkHeader, IDiffOp, toHunks } from './diff';
import { IFileDiff } from './payload';

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

