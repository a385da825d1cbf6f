/**
 * Copy buttons on commands, outputs, diffs' new text and tables. The text to copy is
 * computed when clicked (a card re-renders while it runs).
 */

import { el } from './cardbase';

/** Writes text to the clipboard; false when the browser refuses (no permission, http). */
export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

/** A small "Copy" button; says "Copied" (or "Copy failed") for a moment after a click. */
export function copyButton(text: () => string, what: string): HTMLButtonElement {
  const button = el('button', 'iac-copy-button', 'Copy');
  button.type = 'button';
  button.title = `Copy ${what}`;
  button.setAttribute('aria-label', `Copy ${what}`);
  button.addEventListener('click', event => {
    event.preventDefault();
    event.stopPropagation();
    void copyText(text()).then(ok => {
      button.textContent = ok ? 'Copied' : 'Copy failed';
      window.setTimeout(() => {
        button.textContent = 'Copy';
      }, 1500);
    });
  });
  return button;
}

/** Wraps node in a box with a copy button at its top right; returns the box. */
export function withCopy(node: HTMLElement, text: () => string, what: string): HTMLElement {
  const box = el('div', 'iac-copyable');
  box.appendChild(node);
  box.appendChild(copyButton(text, what));
  return box;
}

/** A cell's visible text: a folded <details> gives its summary only (a plan row's
 * address, not its attribute diff). */
function cellText(cell: HTMLElement): string {
  const copy = cell.cloneNode(true) as HTMLElement;
  for (const hidden of copy.querySelectorAll('details > :not(summary)')) {
    hidden.remove();
  }
  return (copy.textContent ?? '').trim();
}

/** A table's text: one line per row, cells separated by tabs (pastes into a sheet). */
export function tableText(table: HTMLTableElement): string {
  return [...table.rows].map(row => [...row.cells].map(cellText).join('\t')).join('\n');
}
