/**
 * Copy buttons on the tables of the agent's text: Markdown tables rendered in the outputs
 * of an agent notebook or console (the answer as it streams and its final Markdown). The
 * button copies the table as tab-separated text, which pastes into a sheet as cells.
 *
 * JupyterLab renders the Markdown itself and re-renders it on every update, so the
 * buttons are put back after each render (a MutationObserver on the widget's node); the
 * cards' own tables carry their buttons already.
 */

import { copyButton, tableText } from './copy';

const DONE = 'iac-table-copy';
/** Tables of rendered output (not of Markdown cells, not of the cards). */
const TABLES = `.jp-OutputArea-output table:not(.${DONE})`;

/** Adds a copy button to each output table under root that has none; returns how many. */
export function addTableCopies(root: HTMLElement): number {
  let added = 0;
  for (const table of root.querySelectorAll<HTMLTableElement>(TABLES)) {
    if (table.closest('.iac-copyable, .iac-toolcard-widget, .iac-plan-widget')) {
      continue;
    }
    table.classList.add(DONE);
    const box = document.createElement('div');
    box.className = 'iac-copyable iac-table-copyable';
    table.replaceWith(box);
    box.append(table, copyButton(() => tableText(table), 'the table (tab-separated)'));
    added++;
  }
  return added;
}

/**
 * Keeps copy buttons on the output tables of root while enabled() says so (the widget
 * runs an agent kernel); returns a function that stops watching.
 */
export function watchTables(root: HTMLElement, enabled: () => boolean): () => void {
  let queued = false;
  const scan = () => {
    queued = false;
    if (enabled()) {
      addTableCopies(root);
    }
  };
  const observer = new MutationObserver(() => {
    if (!queued) {
      queued = true;
      window.requestAnimationFrame(scan);
    }
  });
  observer.observe(root, { childList: true, subtree: true });
  scan();
  return () => observer.disconnect();
}
