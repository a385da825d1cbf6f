/**
 * The command that goes to the question waiting for an answer: it scrolls to the tool
 * call's card and flashes it, or asks the question in a dialog when this page no longer
 * has the live card and its buttons (after a reload).
 */

import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import { askQuestion } from '../questions/answer';
import { AgentWidget, ITracked, findCall } from './widgets';

export const GOTO_PENDING = 'iac-kernel:go-to-permission-request';

/** The card of a call in the widget, when it is drawn. */
function cardNode(widget: AgentWidget, callId: string): HTMLElement | null {
  return widget.node.querySelector<HTMLElement>(`.iac-toolcard[data-call-id="${CSS.escape(callId)}"]`);
}

/** Whether the output area of a call's card shows the question's buttons. */
function hasButtons(widget: AgentWidget, callId: string): boolean {
  const area = cardNode(widget, callId)?.closest('.jp-OutputArea');
  return !!area?.querySelector('.jupyter-widgets button');
}

/** Scroll to a call's card and flash it, leaving the notebook in command mode. */
async function revealCall(widget: AgentWidget, callId: string): Promise<boolean> {
  const found = findCall(widget, callId);
  if (widget instanceof NotebookPanel) {
    if (!found) {
      return false;
    }
    const notebook = widget.content;
    notebook.mode = 'command';
    notebook.activeCellIndex = found.index;
    await notebook.scrollToCell(notebook.widgets[found.index], 'center');
    notebook.mode = 'command';
    notebook.activate();
  }
  const card = cardNode(widget, callId);
  if (!card) {
    return found !== null;
  }
  card.scrollIntoView({ block: 'center' });
  card.classList.remove('iac-toolcard-flash');
  void card.offsetWidth; // restart the animation
  card.classList.add('iac-toolcard-flash');
  return true;
}

/** Run the command when it is enabled (a question waits): what the status items do on click. */
export function goToPending(app: JupyterFrontEnd): void {
  if (app.commands.isEnabled(GOTO_PENDING)) {
    void app.commands.execute(GOTO_PENDING);
  }
}

/** Add the command (and its palette item) for the questions of the `current()` widget. */
export function addGoToPending(
  app: JupyterFrontEnd,
  current: () => ITracked | null,
  palette: ICommandPalette | null
): void {
  app.commands.addCommand(GOTO_PENDING, {
    label: 'Go to Agent Permission Request',
    caption: 'Scroll to the tool call that waits for Allow / Reject (or answer it here)',
    isEnabled: () => (current()?.activity.pendingCount ?? 0) > 0,
    execute: async () => {
      const now = current();
      const callId = now?.activity.firstPendingCallId;
      if (!now || !callId) {
        return false;
      }
      if (now.widget instanceof Widget && app.shell.currentWidget !== now.widget) {
        app.shell.activateById(now.widget.id);
      }
      const shown = await revealCall(now.widget, callId);
      // This page saw the question live and its buttons are under the card. (A card
      // update seen after a reload, e.g. its heartbeat, brings the card back but not
      // the buttons: then the question is asked here.)
      if (now.activity.pending.some(call => call.callId === callId) && hasButtons(now.widget, callId)) {
        return shown;
      }
      // Asked before this page loaded: answer it here, on the kernel's status channel.
      const question = now.activity.questions.find(q => q.callId === callId);
      if (question && now.channel.open) {
        await askQuestion(question, (option, note, values) =>
          now.channel.answer(question.id, option, note, values)
        );
        now.channel.refresh();
        return true;
      }
      return shown;
    }
  });
  palette?.addItem({ command: GOTO_PENDING, category: 'iac-kernel' });
}
