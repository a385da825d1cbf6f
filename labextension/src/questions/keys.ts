/**
 * Questions answered from the keyboard, and announced.
 *
 * The kernel's buttons come in a box with the class `iac-question` (iac_kernel/kernel/ask/widgets.py).
 * When one appears on this page, the focus moves to its first button (Reject first for a
 * danger question), unless the user is writing in an editor or a text field (typed a
 * character in the last seconds) or a dialog is open, and an
 * `aria-live` region announces it. With the focus in the box, `a` answers Allow once and
 * `r` Reject once (1, 2, 3... press the n-th button). A question with a form (the tool
 * card's `iac-toolcard-form`, a typed confirmation) gets the focus in its first field
 * instead, and a key never presses a disabled button: `a` cannot approve a typed
 * confirmation before the name is typed.
 */

const BOX = '.iac-question';
/** The user is writing when they typed a character this recently (ms). */
const TYPING_MS = 3000;

/** The button a key presses in a question box, or null. */
export function buttonForKey(key: string, labels: string[]): number | null {
  const lower = labels.map(l => l.trim().toLowerCase());
  if (key === 'a') {
    const index = lower.indexOf('allow once');
    return index >= 0 ? index : null;
  }
  if (key === 'r') {
    const index = lower.findIndex(l => l === 'reject once' || l === 'reject');
    return index >= 0 ? index : null;
  }
  if (/^[1-9]$/.test(key)) {
    const index = Number(key) - 1;
    return index < labels.length ? index : null;
  }
  return null;
}

function typing(node: Element | null): boolean {
  return (
    node instanceof HTMLInputElement ||
    node instanceof HTMLTextAreaElement ||
    (node instanceof HTMLElement && (node.isContentEditable || !!node.closest('.cm-editor')))
  );
}

function buttonsOf(box: Element): HTMLButtonElement[] {
  // The answer buttons only: "Reject with note" goes with its text field.
  return [...box.querySelectorAll<HTMLButtonElement>('button')].filter(
    b => !/with note/i.test(b.textContent ?? '')
  );
}

/** Install the key handler, the focus move and the announcer on a document. */
export function installQuestionKeys(doc: Document): void {
  const live = doc.createElement('div');
  live.className = 'iac-sr-only';
  live.setAttribute('aria-live', 'assertive');
  live.setAttribute('role', 'status');
  doc.body.appendChild(live);

  // When the user last typed a character (not Shift+Enter that ran the cell): the focus
  // stays in an editor they are writing in.
  let lastTyped = 0;
  // Capture on window: before JupyterLab's command-mode shortcuts (`a` inserts a cell).
  doc.defaultView?.addEventListener(
    'keydown',
    event => {
      if (event.key === 'Enter' && (event.shiftKey || event.ctrlKey || event.metaKey)) {
        lastTyped = 0; // the cell runs: the user is done writing it
        return;
      }
      if (event.ctrlKey || event.metaKey || event.altKey) {
        return;
      }
      if (typing(event.target as Element)) {
        if (event.key.length === 1 || event.key === 'Backspace') {
          lastTyped = Date.now();
        }
        return;
      }
      const box = (event.target as Element | null)?.closest?.(BOX);
      if (!box) {
        return;
      }
      const buttons = buttonsOf(box);
      const index = buttonForKey(event.key.toLowerCase(), buttons.map(b => b.textContent ?? ''));
      if (index === null) {
        return;
      }
      event.preventDefault();
      event.stopImmediatePropagation();
      if (!buttons[index].disabled) {
        buttons[index].click();
      }
    },
    true
  );

  const seen = new WeakSet<Element>();
  const arrive = (box: Element) => {
    if (seen.has(box)) {
      return;
    }
    const buttons = buttonsOf(box);
    if (buttons.length === 0) {
      return; // the widget has not drawn its buttons yet; the next mutation brings them
    }
    seen.add(box);
    const danger = box.classList.contains('iac-question-danger');
    const area = box.closest('.jp-OutputArea') ?? box.parentElement;
    const card = area?.querySelector('.iac-toolcard-is-awaiting_permission .iac-toolcard-title');
    const what = card?.textContent ?? 'a tool call';
    // A form on the card (a typed confirmation): its first field takes the focus.
    const field = area?.querySelector<HTMLElement>(
      '.iac-toolcard-form .iac-form input, .iac-toolcard-form .iac-form select'
    );
    const hint = field?.getAttribute('placeholder');
    live.textContent =
      `${danger ? 'Destructive question' : 'Question'} from the agent: approve ${what}? ` +
      (field ? `Fill in the form${hint ? ` (${hint})` : ''}.` : 'Press a to allow once, r to reject once.');
    // Never from a field the user is writing in, nor out of an open dialog.
    const writing = typing(doc.activeElement) && Date.now() - lastTyped < TYPING_MS;
    if (!writing && !doc.querySelector('.jp-Dialog')) {
      (field ?? buttons[0]).focus();
    }
  };
  new MutationObserver(records => {
    for (const record of records) {
      for (const node of record.addedNodes) {
        if (!(node instanceof Element)) {
          continue;
        }
        const box = node.matches(BOX) ? node : node.closest(BOX) ?? node.querySelector(BOX);
        if (box) {
          arrive(box);
        }
      }
    }
  }).observe(doc.body, { childList: true, subtree: true });
}
