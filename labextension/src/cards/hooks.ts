/**
 * State shared by the MIME renderers and the app plugin: the hooks the app sets
 * (channel/cardhooks.ts) and the sections each card keeps open. Both entry points are
 * exposed by the same federated bundle, so they share this module.
 */

import { AnswerQuestion } from '../questions/model';

/** Set by the app plugin; renderers work without them. */
export const appHooks: {
  /** Open a file location in the app; false when it cannot. */
  openLocation?: (location: string) => boolean;
  /** The whole output of a call, fetched from the kernel of the panel holding `node`. */
  fullOutput?: (callId: string, node: HTMLElement) => Promise<string>;
  /** Answer a pending question on the status channel of `node`'s kernel. */
  answer?: (node: HTMLElement, ...answer: Parameters<AnswerQuestion>) => Promise<void>;
  /** A plan row's attribute diff (a card left it out), from the kernel of `node`'s panel. */
  planRow?: (key: string, address: string, node: HTMLElement) => Promise<string[] | null>;
} = {};

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

/** Cards remembered, so a re-created renderer keeps the user's open/closed sections. */
const MAX_REMEMBERED = 1000;
const sections = new Map<string, ISectionState>();

/** The section state for a call id (created empty on first use). */
export function sectionState(callId: string): ISectionState {
  let state = sections.get(callId);
  if (!state) {
    state = {};
    sections.set(callId, state);
    while (sections.size > MAX_REMEMBERED) {
      sections.delete(sections.keys().next().value as string);
    }
  }
  return state;
}
