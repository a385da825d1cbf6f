/**
 * Building blocks shared by the parts of a tool card: the card's options, the element
 * helper and the <details> sections whose open state survives re-rendering.
 */

/** Which sections the user opened or closed; kept across re-renders of a card. */
export interface ISectionState {
  input?: boolean;
  output?: boolean;
  diff?: boolean;
  /** The whole output, once the user asked for it. */
  fullText?: string;
  /** The output was shown open while the command ran: it stays open when it ends. */
  shownLive?: boolean;
}

export interface ICardOptions {
  /** Remembered open/closed sections, updated when the user toggles one. */
  sections: ISectionState;
  /** Opens a location (path, optionally "path:line") in the app, if it can. */
  openLocation?: (location: string) => boolean;
  /** Parser warnings to show at the bottom of the card. */
  warnings?: string[];
  /** Answers the call's pending question on the kernel's status channel (absent: the
   * card cannot answer; a question with a form then says so). */
  answer?: (
    questionId: string,
    option: string,
    note?: string,
    values?: Record<string, string | number | boolean | null>
  ) => Promise<void>;
  /** Fetches a call's whole output from the kernel (absent: no "Show full output" button). */
  fullOutput?: (callId: string) => Promise<string>;
}

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

/** A <details> section whose open state survives re-rendering. */
export type SectionName = 'input' | 'output' | 'diff';

export function section(
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

