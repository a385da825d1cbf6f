/**
 * A card a notebook saved while its question waited ("awaiting permission" in the file).
 * Once the kernel says what became of the call (its card, or the outcome in the session's
 * history), the card says it was saved mid-question and what happened; it never shows a
 * question nobody can answer any more.
 */

/** Card status for a call asked and never answered, and for one nobody knows about. */
export const NOT_RUN = 'not_run';
export const SAVED_ASKING = 'saved_asking';

export const SAVED_LABELS: Record<string, string> = {
  [NOT_RUN]: 'Not run',
  [SAVED_ASKING]: 'Saved mid-question'
};

const OUTCOME_TEXT: Record<string, string> = {
  done: 'it was allowed and ran (Done).',
  failed: 'it was allowed and failed, or was interrupted.',
  denied: 'it was rejected, so it did not run.',
  cancelled: 'the turn was cancelled, so it did not run.',
  [NOT_RUN]: 'nobody answered it, so it did not run.'
};

/** What the card says under its header. */
export function savedNote(outcome: string | null): string {
  const what =
    (outcome && OUTCOME_TEXT[outcome]) ??
    'this kernel does not know what became of it (its session is not in the store here).';
  return `Saved while this question waited for an answer; since then ${what}`;
}

/** The saved card with the outcome the kernel reported (null: nobody knows). */
export function staleCard(card: Record<string, any>, outcome: string | null): Record<string, any> {
  const status = outcome && outcome in OUTCOME_TEXT ? outcome : SAVED_ASKING;
  const question = typeof card.question === 'object' && card.question ? card.question : {};
  return {
    ...card,
    status,
    live: false,
    question: { ...question, state: 'saved', answer: null, note: savedNote(outcome) }
  };
}

const FALLBACK_LABELS: Record<string, string> = {
  done: 'done',
  failed: 'failed',
  denied: 'denied',
  cancelled: 'cancelled',
  [NOT_RUN]: 'not run',
  [SAVED_ASKING]: 'saved mid-question'
};

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, c => `&#${c.charCodeAt(0)};`);
}

/**
 * The settled card's text/html and text/plain, in place of the saved "awaiting
 * permission" forms: what nbconvert and frontends without this extension show once the
 * notebook is saved again.
 */
export function staleFallback(card: Record<string, any>): Record<string, string> {
  const title = typeof card.title === 'string' ? card.title : 'tool call';
  const status = typeof card.status === 'string' ? card.status : SAVED_ASKING;
  const label = FALLBACK_LABELS[status] ?? status;
  const note = typeof card.question?.note === 'string' ? card.question.note : '';
  const plain = `[${label}] ${title}` + (note ? `\n${note}` : '');
  const html =
    `<div class="iac-toolcall" data-status="${escapeHtml(status)}" style="border:1px solid ` +
    'var(--jp-border-color1, rgba(128,128,128,.45));border-radius:6px;padding:6px 10px;margin:4px 0">' +
    `<b>${escapeHtml(label)}</b> <code>${escapeHtml(title)}</code>` +
    (note ? `<div style="opacity:.75">${escapeHtml(note)}</div>` : '') +
    '</div>';
  return { 'text/html': html, 'text/plain': plain };
}
