/**
 * The approver's side in JupyterLab: the sidebar list of the team's pending approvals
 * (who asks, the plan's summary, the rule, what it waits for, when it expires), and a
 * record opened in the main area on the plan card the requester saw (plan/plan.ts:
 * destroys and replacements first, each row's diff on demand, policy findings) with a
 * note and Approve / Reject. Both refresh while they are shown. Text goes in through
 * textContent only.
 */

import { Widget } from '@lumino/widgets';

import { el } from '../dom';
import { parsePlan } from '../plan/model';
import { renderPlan } from '../plan/plan';
import { ApprovalsApi } from './api';
import {
  IApproval,
  askedText,
  expiresText,
  outcomeText,
  planPayloadOf
} from './model';

/** How often a shown list or record is asked for again (ms). */
export const REFRESH_MS = 15_000;
/** The longest note the server keeps (iac_kernel/server/approvals.py NOTE_CHARS). */
const NOTE_CHARS = 2000;

/** Calls `tick` every REFRESH_MS while `widget` is visible; returns the stopper. */
function whileVisible(widget: Widget, tick: () => void): () => void {
  const timer = window.setInterval(() => {
    if (widget.isVisible) {
      tick();
    }
  }, REFRESH_MS);
  return () => window.clearInterval(timer);
}

/** The sidebar: the team's pending records; a click opens one (`open`). */
export class ApprovalsPanel extends Widget {
  constructor(
    private _api: ApprovalsApi,
    private _open: (id: string) => void
  ) {
    super();
    this.addClass('iac-approvals');
    const head = el('div', 'iac-approvals-head');
    head.appendChild(el('h2', 'iac-approvals-title', 'Pending approvals'));
    const again = el('button', 'jp-Button jp-mod-styled iac-approvals-refresh', 'Refresh');
    again.type = 'button';
    again.addEventListener('click', () => void this.refresh());
    head.appendChild(again);
    this._status.setAttribute('role', 'status');
    this._list.setAttribute('aria-label', 'Pending approvals');
    this.node.append(head, this._status, this._list);
    this._stop = whileVisible(this, () => void this.refresh());
  }

  /** Ask the server for the pending records and show them. */
  async refresh(): Promise<void> {
    try {
      const listing = await this._api.list();
      this._render(listing.approvals);
      const n = listing.approvals.length;
      this._status.textContent = n ? '' : 'No approval is waiting.';
      this.title.caption = n ? `Approvals (${n} pending)` : 'Approvals';
    } catch (error) {
      this._status.textContent = `Could not list the approvals: ${(error as Error).message}`;
    }
  }

  private _render(records: IApproval[]): void {
    const now = Date.now();
    const items = records.map(record => {
      const item = el('li', 'iac-approvals-item');
      item.dataset.id = record.id;
      const open = el('button', 'iac-approvals-open');
      open.type = 'button';
      open.title = `Open approval ${record.id}`;
      const who = el('div', 'iac-approvals-who', record.requester);
      if (record.yours) {
        who.appendChild(el('span', 'iac-approvals-yours', ' · your request'));
      }
      open.append(
        who,
        el('div', 'iac-approvals-summary', record.summary),
        el('div', 'iac-approvals-rule', `rule: ${record.rule}`),
        el('div', 'iac-approvals-wait', record.waiting),
        el(
          'div',
          'iac-approvals-when',
          [expiresText(record.expires_at, now), askedText(record.created_at, now)]
            .filter(Boolean)
            .join(' · ')
        )
      );
      open.addEventListener('click', () => this._open(record.id));
      item.appendChild(open);
      return item;
    });
    this._list.replaceChildren(...items);
  }

  protected onAfterShow(): void {
    void this.refresh();
  }

  dispose(): void {
    this._stop();
    super.dispose();
  }

  private _status = el('div', 'iac-approvals-status');
  private _list = el('ul', 'iac-approvals-list');
  private _stop: () => void;
}

/** One record in the main area: its facts, the plan card, and the decision. */
export class ApprovalView extends Widget {
  constructor(
    private _api: ApprovalsApi,
    readonly recordId: string
  ) {
    super();
    this.id = `iac-approval-${recordId}`;
    this.addClass('iac-approval');
    this.title.label = `Approval ${recordId}`;
    this.title.closable = true;
    this.node.tabIndex = -1;
    this._facts.setAttribute('aria-live', 'polite');
    this._result.setAttribute('role', 'status');
    this.node.append(this._facts, this._card, this._decision());
    this._stop = whileVisible(this, () => void this.load(false));
    void this.load(true);
  }

  /** The record from the server: its facts and buttons, and (`withCard`) its card. */
  async load(withCard: boolean): Promise<void> {
    try {
      const record = await this._api.get(this.recordId, withCard);
      this._show({ ...record, card: withCard ? record.card : this._record?.card }, withCard);
    } catch (error) {
      if (!this._record) {
        this._facts.replaceChildren(el('div', 'iac-approval-error', (error as Error).message));
      }
      this._result.textContent = (error as Error).message;
    }
  }

  private _show(record: IApproval, withCard: boolean): void {
    this._record = record;
    this.title.label = `Approval · ${record.requester}`;
    this.title.caption = `${record.requester}: ${record.summary}`;
    const facts = [
      el('h2', 'iac-approval-title', `${record.requester} asks to apply`),
      el('div', 'iac-approval-summary', record.summary),
      el('div', 'iac-approval-rule', `rule: ${record.rule}`),
      el('div', `iac-approval-state iac-approval-${record.status}`, outcomeText(record))
    ];
    const when = [expiresText(record.expires_at), askedText(record.created_at)].filter(Boolean);
    if (record.status === 'pending' && when.length) {
      facts.push(el('div', 'iac-approval-when', when.join(' · ')));
    }
    const votes = record.approvals.map(v => `${v.by}${v.note ? `: ${v.note}` : ''}`);
    if (record.status === 'pending' && votes.length) {
      facts.push(el('div', 'iac-approval-votes', `approved so far by ${votes.join('; ')}`));
    }
    facts.push(
      el('div', 'iac-approval-sha', `plan sha256 ${record.plan_sha256.slice(0, 12)} · id ${record.id}`)
    );
    this._facts.replaceChildren(...facts);
    if (withCard) {
      this._renderCard(record);
    }
    this._buttons();
  }

  private _renderCard(record: IApproval): void {
    const payload = planPayloadOf(record.card);
    const parsed = payload ? parsePlan(payload) : null;
    if (!payload || !parsed || !parsed.ok) {
      this._card.replaceChildren(
        el(
          'div',
          'iac-approval-nocard',
          'This record carries no plan card; its summary is above. ' +
            `\`iac-kernel approvals show ${record.id}\` shows the record.`
        )
      );
      return;
    }
    // Rows left out of the card's diffs stay so: the requester's kernel is not asked.
    renderPlan(this._card, parsed.value, payload.rows);
  }

  private _decision(): HTMLElement {
    const box = el('div', 'iac-approval-decide');
    const label = el('label', 'iac-approval-note-label', 'Note (kept with your decision)');
    this._note.className = 'iac-approval-note';
    this._note.maxLength = NOTE_CHARS;
    this._note.rows = 2;
    label.appendChild(this._note);
    const buttons = el('div', 'iac-approval-buttons');
    for (const [button, decision] of [
      [this._approve, 'approve'],
      [this._reject, 'reject']
    ] as const) {
      button.type = 'button';
      button.addEventListener('click', () => void this._decide(decision));
      buttons.appendChild(button);
    }
    box.append(label, buttons, this._result);
    return box;
  }

  /** Buttons only for a pending record someone else asked for, that you did not answer. */
  private _buttons(): void {
    const record = this._record;
    let why = '';
    if (!record) {
      why = 'loading';
    } else if (record.yours) {
      why = 'You asked for this change: another person must approve or reject it.';
    } else if (record.status !== 'pending') {
      why = `This record is ${outcomeText(record)}.`;
    } else if (record.answered) {
      why = 'You answered this record already.';
    }
    const off = this._busy || why !== '';
    this._approve.disabled = off;
    this._reject.disabled = off;
    this._note.disabled = off;
    if (why && !this._busy && why !== 'loading' && !this._decided) {
      this._result.textContent = why;
    }
  }

  private async _decide(decision: 'approve' | 'reject'): Promise<void> {
    const record = this._record;
    if (!record || this._busy) {
      return;
    }
    this._busy = true;
    this._buttons();
    this._result.textContent = decision === 'approve' ? 'Approving…' : 'Rejecting…';
    try {
      const done = await this._api.decide(
        record.id,
        decision,
        this._note.value,
        record.plan_sha256
      );
      this._decided = true;
      this._result.textContent = `Done: ${outcomeText(done)}.`;
      this._busy = false;
      this._show({ ...record, ...done, card: record.card }, false);
    } catch (error) {
      this._busy = false;
      this._result.textContent = `Refused: ${(error as Error).message}`;
      this._buttons();
    }
  }

  dispose(): void {
    this._stop();
    super.dispose();
  }

  private _record: IApproval | null = null;
  private _busy = false;
  private _decided = false;
  private _facts = el('div', 'iac-approval-facts');
  private _card = el('div', 'iac-approval-card iac-plan-widget');
  private _note = el('textarea');
  private _approve = el('button', 'jp-Button jp-mod-styled jp-mod-accept', 'Approve');
  private _reject = el('button', 'jp-Button jp-mod-styled jp-mod-warn', 'Reject');
  private _result = el('div', 'iac-approval-result');
  private _stop: () => void;
}
