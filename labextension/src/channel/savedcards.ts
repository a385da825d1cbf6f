/**
 * Cards and question buttons saved in a notebook while their question waited: once the
 * kernel runs no turn, each such card says what became of its call, and the buttons
 * (whose widgets are gone) say they are no longer asked.
 */

import { NotebookPanel } from '@jupyterlab/notebook';

import { TOOLCALL_MIME } from '../cards/payload';
import { staleCard, staleFallback } from '../cards/stale';
import { DISPLAY_ID_KEY } from './reroute';
import { ITracked, findCall, outputLists } from './widgets';

const WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json';
const SAVED_BUTTONS_NOTE = {
  'text/markdown': '_(The buttons of a question that waited when this notebook was saved; it is no longer asked: the card above says what became of the call.)_',
  'text/plain': '(buttons of a question saved while it waited; no longer asked)'
};

/** A question's buttons (ipywidgets) saved in the notebook, as the kernel marks them. */
function isSavedButtons(output: Record<string, any>): boolean {
  const id = output.metadata?.[DISPLAY_ID_KEY];
  return typeof id === 'string' && id.startsWith('iac-permission-') && WIDGET_VIEW in (output.data ?? {});
}

/**
 * Cards saved while their question waited: when the kernel runs no turn, no question can
 * wait, so each such card asks the kernel what became of its call and says so. `checked`
 * holds the calls already asked about (or being asked).
 */
export async function settleSavedCards(entry: ITracked, checked: Set<string>): Promise<void> {
  const { widget, activity, channel } = entry;
  if (!(widget instanceof NotebookPanel) || !channel.open || activity.busy !== false) {
    return;
  }
  const asking = new Set(activity.questions.map(q => q.callId));
  const stale: { callId: string; sessionId: string }[] = [];
  for (const { outputs } of outputLists(widget)) {
    for (let o = 0; o < (outputs?.length ?? 0); o++) {
      const saved = outputs.get(o).toJSON();
      if (isSavedButtons(saved)) {
        // Buttons of a question nobody asks any more: their widgets are gone with it.
        outputs.set(o, { ...saved, data: SAVED_BUTTONS_NOTE });
        continue;
      }
      const card = outputs.get(o).data?.[TOOLCALL_MIME] as Record<string, unknown> | undefined;
      const callId = typeof card?.callId === 'string' ? card.callId : '';
      if (card?.status === 'awaiting_permission' && callId && !asking.has(callId) && !checked.has(callId)) {
        checked.add(callId);
        stale.push({ callId, sessionId: typeof card.sessionId === 'string' ? card.sessionId : '' });
      }
    }
  }
  for (const { callId, sessionId } of stale) {
    let reply: { card: unknown; outcome: string | null };
    try {
      reply = await channel.callOutcome(callId, sessionId);
    } catch {
      checked.delete(callId);
      continue;
    }
    const found = findCall(widget, callId);
    if (!found || reply.outcome === 'awaiting_permission') {
      checked.delete(callId);
      continue;
    }
    const json = found.outputs.get(found.o).toJSON();
    const saved = json.data?.[TOOLCALL_MIME];
    if (!saved || saved.status !== 'awaiting_permission') {
      continue;
    }
    const card = (reply.card as Record<string, any> | null) ?? staleCard(saved, reply.outcome);
    // The saved text/html and text/plain said "awaiting permission": they follow suit.
    const data = { ...json.data, ...staleFallback(card), [TOOLCALL_MIME]: card };
    found.outputs.set(found.o, { ...json, data });
  }
}
