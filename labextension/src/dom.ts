/**
 * DOM building blocks shared by every part: the element helper, and Copy buttons (on
 * commands, outputs, diffs' new text, the plan's tables, and the Markdown tables of the
 * agent's text). Text to copy is computed when clicked (a card re-renders while it runs).
 * Functions only: nothing here touches the DOM when loaded, so node tests can import it.
 */

export function el<K extends keyof HTMLElementTagNameMap>(
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
  box.append(node, copyButton(text, what));
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
    const box = el('div', 'iac-copyable iac-table-copyable');
    table.replaceWith(box);
    box.append(table, copyButton(() => tableText(table), 'the table (tab-separated)'));
    added++;
  }
  return added;
}

/**
 * Keeps copy buttons on the output tables of root (the Markdown of the agent's text, which
 * JupyterLab renders again on every update) while enabled() says so (the widget runs an
 * agent kernel); returns a function that stops watching.
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
