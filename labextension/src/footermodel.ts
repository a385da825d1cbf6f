/**
 * The per-turn footer's payload (kernel/footer.py) and its one-line text; no DOM, so the
 * unit tests run in node.
 */

import { formatTokens } from './payload';

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

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0;
}

/** Reads the kernel's payload; null when it is not one. */
export function parseFooter(raw: unknown): ITurnFooter | null {
  if (typeof raw !== 'object' || raw === null) {
    return null;
  }
  const data = raw as Record<string, unknown>;
  if (typeof data.model !== 'string') {
    return null;
  }
  return {
    model: data.model,
    input: count(data.input),
    cacheRead: count(data.cacheRead),
    output: count(data.output),
    elapsed: count(data.elapsed),
    stopReason: typeof data.stopReason === 'string' ? data.stopReason : '',
    cost: typeof data.cost === 'number' && Number.isFinite(data.cost) && data.cost >= 0 ? data.cost : null
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
