/**
 * Numbers, durations and notes as the cards and the status bar write them.
 */

import type { IToolCall } from './payload';

/** 4919 -> "4,919" (en-US grouping whatever the browser's locale, like the kernel). */
export function formatCount(n: number): string {
  return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** Lines in a text as an editor counts them: a final newline ends a line, it does not add one. */
export function countLines(text: string): number {
  if (text === '') {
    return 0;
  }
  const lines = text.split('\n').length;
  return text.endsWith('\n') ? lines - 1 : lines;
}

/**
 * The honest note under a cut output: which lines the card hides, and that the agent
 * saw all of it (only the notebook's copy is cut).
 */
export function hiddenNote(call: IToolCall): string | null {
  if (!call.outputTruncated) {
    return null;
  }
  if (call.hidden) {
    const { fromLine, toLine } = call.hidden;
    const range =
      fromLine === toLine
        ? `line ${formatCount(fromLine)}`
        : `lines ${formatCount(fromLine)}–${formatCount(toLine)}`;
    const total = call.outputLines !== null ? ` of ${formatCount(call.outputLines)}` : '';
    return `${range}${total} hidden; the agent saw all of it`;
  }
  return call.outputNote ?? 'Part of the output is hidden here; the agent saw all of it';
}

/** Seconds as "0.4 s", "12 s", "3 min 05 s". */
export function formatElapsed(seconds: number): string {
  if (seconds < 10) {
    return `${Math.max(0, seconds).toFixed(1)} s`;
  }
  if (seconds < 60) {
    return `${Math.floor(seconds)} s`;
  }
  const minutes = Math.floor(seconds / 60);
  const rest = Math.floor(seconds % 60);
  return `${minutes} min ${rest.toString().padStart(2, '0')} s`;
}

/** 1234 -> "1.2k", 2_500_000 -> "2.5M". */
export function formatTokens(n: number): string {
  if (n < 1000) {
    return String(Math.round(n));
  }
  if (n < 999_500) {
    return `${(n / 1000).toFixed(n < 9_950 ? 1 : 0)}k`;
  }
  return `${(n / 1_000_000).toFixed(1)}M`;
}
