/**
 * State shared by the MIME renderers and the app plugin. Both entry points
 * are exposed by the same federated bundle, so they share this module.
 */

import { ISectionState } from './toolcard';

/** Set by the app plugin; renderers work without them. */
export const appHooks: {
  /** Open a file location in the app; false when it cannot. */
  openLocation?: (location: string) => boolean;
  /** The whole output of a call, fetched from the kernel of the panel holding `node`. */
  fullOutput?: (callId: string, node: HTMLElement) => Promise<string>;
  /** Answer a pending question on the status channel of `node`'s kernel. */
  answer?: (
    node: HTMLElement,
    questionId: string,
    option: string,
    note?: string,
    values?: Record<string, string | number | boolean | null>
  ) => Promise<void>;
  /** A plan row's attribute diff (a card left it out), from the kernel of `node`'s panel. */
  planRow?: (key: string, address: string, node: HTMLElement) => Promise<string[] | null>;
} = {};

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
