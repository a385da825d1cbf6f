/**
 * The page title's marker while questions wait ("(1 waiting) agent.ipynb - JupyterLab").
 * JupyterLab rewrites the title when the current tab changes, so the marker is put back
 * after it.
 */

const TITLE_MARK = /^\(\d+ waiting\) /;

export function markedTitle(title: string, waiting: number): string {
  const bare = title.replace(TITLE_MARK, '');
  return waiting > 0 ? `(${waiting} waiting) ${bare}` : bare;
}

/** Keep the page title marked with `waiting()`; returns the function that marks it now. */
export function watchTitle(waiting: () => number): () => void {
  const markTitle = () => {
    const next = markedTitle(document.title, waiting());
    if (next !== document.title) {
      document.title = next;
    }
  };
  const titleNode = document.querySelector('title');
  if (titleNode) {
    new MutationObserver(markTitle).observe(titleNode, { childList: true, characterData: true, subtree: true });
  }
  return markTitle;
}
