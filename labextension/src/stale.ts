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
