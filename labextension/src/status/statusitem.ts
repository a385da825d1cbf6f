/**
 * The status bar item: the current notebook's agent model, mode, session
 * tokens, tool calls waiting for permission (click to jump to them), applies
 * waiting for other people's approval (the record's words, from the kernel), and the
 * newest pull or merge request the kernel opened (a link to it; all in the tooltip).
 */

import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { formatTokens } from '../cards/format';
import { IOpenedRequest, SessionActivity, requestLabel, requestLine } from './activity';

/** The agent's state from the kernel's own info: a question waits, a turn runs, or idle. */
export function agentState(activity: SessionActivity): 'waiting' | 'running' | 'idle' | 'unknown' {
  if (activity.pendingCount > 0) {
    return 'waiting';
  }
  if (activity.busy === true || activity.running.length > 0) {
    return 'running';
  }
  return activity.busy === false ? 'idle' : 'unknown';
}

export const STATE_LABELS: Record<string, string> = {
  waiting: 'waiting for you',
  running: 'running',
  idle: 'idle',
  unknown: ''
};

function span(className: string, text: string): HTMLSpanElement {
  const node = document.createElement('span');
  node.className = className;
  node.textContent = text;
  return node;
}

/**
 * The newest request as a link opening its page in a new tab, "(+K more)" after it. The
 * link's click and keys are its own: the item's go to the pending question.
 */
function requestLink(newest: IOpenedRequest, others: number): HTMLSpanElement {
  const node = span('iac-status-pr', '');
  const link = document.createElement('a');
  link.href = newest.url;
  link.target = '_blank';
  link.rel = 'noopener noreferrer';
  link.textContent = requestLabel(newest);
  link.title = requestLine(newest);
  link.addEventListener('click', event => event.stopPropagation());
  link.addEventListener('keydown', event => {
    if (event.key === 'Enter' || event.key === ' ') {
      event.stopPropagation(); // Enter opens the link, never the item's question
    }
  });
  node.appendChild(link);
  if (others > 0) {
    node.appendChild(document.createTextNode(` (+${others} more)`));
  }
  return node;
}

/** A mode name safe in a class name ("read_only" -> "read_only", odd input -> "other"). */
function modeClass(mode: string): string {
  return /^[a-z_]+$/.test(mode) ? mode : 'other';
}

export class AgentStatusItem extends Widget {
  /** Fired when the item should appear or disappear. */
  readonly activeStateChanged = new Signal<this, void>(this);

  constructor(private _onActivate: () => void) {
    super();
    this.addClass('iac-status-item');
    this.node.setAttribute('role', 'button');
    this.node.tabIndex = 0;
    this.node.addEventListener('click', () => this._onActivate());
    this.node.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        this._onActivate();
      }
    });
  }

  /** Whether the status bar should show the item. */
  get active(): boolean {
    return this._active;
  }

  /**
   * Show activity (null: no iac-kernel notebook is current). isAgentKernel
   * shows the item before the first payload arrives.
   */
  render(activity: SessionActivity | null, isAgentKernel: boolean): void {
    const active = activity !== null && (activity.seen || isAgentKernel);
    if (active !== this._active) {
      this._active = active;
      this.activeStateChanged.emit();
    }
    this.node.replaceChildren();
    if (!activity || !active) {
      return;
    }
    const info = activity.session;
    const pending = activity.pendingCount;
    const running = activity.running.length;
    this.node.classList.toggle('iac-status-has-pending', pending > 0);
    this.node.dataset.mode = info?.mode ?? '';
    const state = agentState(activity);
    this.node.dataset.state = state;
    if (STATE_LABELS[state]) {
      this.node.appendChild(span(`iac-status-state iac-state-${state}`, STATE_LABELS[state]));
    }
    if (pending > 0) {
      this.node.appendChild(
        span('iac-status-pending', `⚠ ${pending} awaiting permission`)
      );
    }
    const approvals = activity.approvals;
    if (approvals.length > 0) {
      const more = approvals.length > 1 ? ` (+${approvals.length - 1} more)` : '';
      this.node.appendChild(span('iac-status-approval', `${approvals[0].waiting}${more}`));
    }
    const requests = activity.pullRequests;
    const newest = requests.length > 0 ? requests[requests.length - 1] : null;
    if (newest) {
      this.node.appendChild(requestLink(newest, requests.length - 1));
    }
    this.node.appendChild(span('iac-status-model', info?.model ?? 'iac-kernel'));
    if (info?.mode) {
      const mode = span(`iac-status-mode iac-mode-${modeClass(info.mode)}`, info.mode);
      if (info.mode === 'bypass') {
        mode.title = 'bypass: edits and commands run without asking (per-call questions still ask)';
      } else if (info.mode === 'read_only') {
        mode.title = 'read_only: only reading tools run; edits and commands are refused';
      }
      this.node.appendChild(mode);
    }
    if (info?.usage) {
      this.node.appendChild(
        span('iac-status-tokens', `${formatTokens(info.usage.totalTokens)} tokens`)
      );
    }
    if (running > 0) {
      this.node.appendChild(span('iac-status-running', `${running} tool${running > 1 ? 's' : ''}`));
    }
    const lines = [
      `Agent session: ${activity.sessionId || 'not started yet'}`,
      info?.title ? `Title: ${info.title}` : '',
      info?.cwd ? `Directory: ${info.cwd}` : '',
      info?.model ? `Model: ${info.model}` : '',
      info?.mode ? `Permission mode: ${info.mode}` : '',
      info?.usage
        ? `Tokens (session): ${info.usage.inputTokens} in, ${info.usage.outputTokens} out, ` +
          `${info.usage.cacheReadTokens} cache read, ${info.usage.cacheWriteTokens} cache write`
        : '',
      info?.turnUsage ? `Tokens (last turn): ${info.turnUsage.totalTokens}` : '',
      ...approvals.map(a => `Approval ${a.id}: ${a.waiting} (rule: ${a.rule})`),
      ...requests.map(requestLine),
      `Tool calls since kernel start: ${activity.callCount}`,
      pending > 0 ? 'Click to go to the permission request.' : ''
    ];
    this.node.setAttribute(
      'aria-label',
      [
        `Agent ${STATE_LABELS[state] || 'status'}`,
        pending > 0 ? `${pending} awaiting permission` : '',
        approvals.length > 0 ? approvals[0].waiting : '',
        newest ? requestLabel(newest) : '',
        info?.model ?? '',
        info?.mode ?? ''
      ]
        .filter(Boolean)
        .join(', ')
    );
    this.node.title = lines.filter(Boolean).join('\n');
  }

  private _active = false;
}
