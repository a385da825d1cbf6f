/**
 * Answering a permission question from the extension, in a dialog: used when the page
 * no longer has the question's live buttons (it was reloaded while the question waited).
 *
 * Same rules as the kernel's buttons: the command and why first; a per-call (danger)
 * question offers Reject first and gives the focus to Reject, never to Allow; a note
 * typed in the box goes to the agent with the rejection.
 */

import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { formQuestion } from './form';
import { FieldValue, IPendingQuestion, answerOrder, optionLabel } from './model';

type Send = (option: string, note?: string, values?: Record<string, FieldValue>) => Promise<void>;

/** The dialog's title for ``question``. */
function dialogTitle(question: IPendingQuestion): string {
  return question.danger ? `⚠ Destructive: ${question.title}` : `Approve ${question.title}?`;
}

/** Makes ``body`` an answer dialog's body showing the question's command and reason. */
function questionHead(body: Widget, question: IPendingQuestion): void {
  body.addClass('iac-answer-dialog');
  body.node.classList.toggle('iac-toolcard-question-danger', question.danger);
  const command = document.createElement('pre');
  command.className = 'iac-toolcard-question-command';
  command.textContent = question.command ? `$ ${question.command}` : question.title;
  const why = document.createElement('div');
  why.className = 'iac-toolcard-question-why';
  why.textContent = question.reason;
  body.node.append(command, why);
}

class QuestionBody extends Widget {
  constructor(question: IPendingQuestion) {
    super();
    questionHead(this, question);
    this._note.className = 'iac-answer-note';
    this._note.placeholder = 'Reject with a note: tell the agent why or what to do instead';
    this._note.setAttribute('aria-label', 'Note sent with a rejection');
    this.node.append(this._note);
  }

  getValue(): string {
    return this._note.value.trim();
  }

  private _note = document.createElement('input');
}

/** Show the question; sends the answer the user picks (nothing if they close it). */
export async function askQuestion(question: IPendingQuestion, send: Send): Promise<void> {
  if (question.form) {
    return askForm(question, send);
  }
  const order = answerOrder(question);
  const label = (option: string) => optionLabel(question, option);
  // A danger question's primary (blue) button is Reject and Allow is the red one; for
  // other questions Allow is primary and Reject a plain button.
  const buttons = order.map(option => {
    const reject = option.startsWith('reject');
    if (question.danger) {
      return reject
        ? Dialog.okButton({ label: label(option), caption: option })
        : Dialog.warnButton({ label: label(option), caption: option });
    }
    return reject
      ? Dialog.createButton({ label: label(option), caption: option, accept: true })
      : Dialog.okButton({ label: label(option), caption: option });
  });
  buttons.push(Dialog.cancelButton({ label: 'Later' }));
  const rejectIndex = order.findIndex(option => option.startsWith('reject'));
  const result = await showDialog<string>({
    title: dialogTitle(question),
    body: new QuestionBody(question),
    buttons,
    // Never Allow by default: Enter rejects a danger question, and closes any other.
    defaultButton: question.danger && rejectIndex >= 0 ? rejectIndex : buttons.length - 1,
    hasClose: true
  });
  const option = order.find(o => o === result.button.caption);
  if (!option) {
    return;
  }
  const note = option.startsWith('reject') ? result.value ?? '' : '';
  await send(option, note || undefined);
}

/**
 * A question with a form (a typed confirmation): the form and its own buttons in the
 * dialog (Allow stays disabled until the typed name matches), the focus in its first
 * field; Enter in a field approves once the form is answered, never the dialog's button.
 */
async function askForm(question: IPendingQuestion, send: Send): Promise<void> {
  const body = new Widget();
  questionHead(body, question);
  const dialog = new Dialog<unknown>({
    title: dialogTitle(question),
    body,
    buttons: [Dialog.cancelButton({ label: 'Later' })],
    // No dialog button answers on Enter: the form's own buttons answer.
    defaultButton: -1,
    focusNodeSelector: '.iac-form input, .iac-form select',
    hasClose: true
  });
  const form = formQuestion(
    { ...question, form: question.form! },
    async (option, note, values) => {
      await send(option, note, values);
      dialog.resolve(0); // answered: close (the only dialog button is "Later")
    }
  );
  body.node.append(form);
  await dialog.launch();
}
