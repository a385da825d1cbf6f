/**
 * Text deltas: the kernel's streaming updates of the agent's text (see textdelta.ts),
 * parsed and put together. No DOM here, so the unit tests can load it.
 */

import { isRecord } from '../json';

export const TEXT_DELTA_MIME = 'application/vnd.iac-kernel.text-delta+json';

export interface ITextDelta {
  /** `"thinking"` when the kernel says so; text otherwise (it sends no kind for text). */
  kind: 'text' | 'thinking';
  /** Where `text` goes, in code points from the start of the display's text. */
  offset: number;
  text: string;
}

/** A delta payload, or null when it is not one (never throws). */
export function parseDelta(raw: unknown): ITextDelta | null {
  if (!isRecord(raw) || typeof raw.text !== 'string') {
    return null;
  }
  const offset = raw.offset;
  if (typeof offset !== 'number' || !Number.isInteger(offset) || offset < 0) {
    return null;
  }
  return { kind: raw.kind === 'thinking' ? 'thinking' : 'text', offset, text: raw.text };
}

/**
 * The text received so far. A delta at the current end is appended; one that starts
 * earlier (a repeat) replaces what follows its offset; one that starts later means the
 * start was missed (a page loaded mid-answer, a notebook saved while it streamed): what
 * is there is kept and `gap` is set, the final update brings the whole text.
 */
export class DeltaText {
  text = '';
  /** Length of `text` in code points (the kernel's offsets). */
  points = 0;
  gap = false;

  apply(delta: ITextDelta): void {
    const added = Array.from(delta.text).length;
    if (delta.offset === this.points) {
      this.text += delta.text;
      this.points += added;
    } else if (delta.offset < this.points) {
      this.text = Array.from(this.text).slice(0, delta.offset).join('') + delta.text;
      this.points = delta.offset + added;
    } else {
      this.gap = true;
      this.text += (this.text ? '\n\n' : '') + delta.text;
      this.points = delta.offset + added;
    }
  }
}
