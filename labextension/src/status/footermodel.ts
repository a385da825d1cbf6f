/**
 * The per-turn footer's payload (kernel/render/footer.py) and its one-line text; no DOM, so the
 * unit tests run in node.
 */

import { formatTokens } from '../cards/format';
import { count, finiteNumber, isRecord } from '../json';

export const FOOTER_MIME = 'application/vnd.iac-kernel.footer+json';

export interface ITurnFooter {
  model: string;
  input: number;
  cacheRead: number;
  output: number;
  elapsed: number;
  stopReason: string;
  /** USD at list price, only for a direct API key of a priced model (models/prices.py). */
  cost: number | null;
}

/** Reads the kernel's payload; null when it is not one. */
export function parseFooter(raw: unknown): ITurnFooter | null {
  if (!isRecord(raw) || typeof raw.model !== 'string') {
    return null;
  }
  const cost = finiteNumber(raw.cost);
  return {
    model: raw.model,
    input: count(raw, 'input'),
    cacheRead: count(raw, 'cacheRead'),
    output: count(raw, 'output'),
    elapsed: count(raw, 'elapsed'),
    stopReason: typeof raw.stopReason === 'string' ? raw.stopReason : '',
    cost: cost !== null && cost >= 0 ? cost : null
  };
}

/** The footer as one line, as the kernel writes its text/plain. */
export function footerLine(footer: ITurnFooter): string {
  const read = footer.input + footer.cacheRead;
  let text = `${footer.model} · ${formatTokens(read)} in`;
  if (footer.cacheRead > 0 && read > 0) {
    text += ` (${Math.round((100 * footer.cacheRead) / read)}% cached)`;
  }
  text += ` · ${formatTokens(footer.output)} out · ${footer.elapsed.toFixed(1)} s`;
  if (footer.cost === null) {
    return text;
  }
  const dollars = footer.cost < 1 ? footer.cost.toFixed(4) : footer.cost.toFixed(2);
  return `${text} · ≈$${dollars} (list price)`;
}
