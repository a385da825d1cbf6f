/**
 * Live state of one notebook's agent session, read from its kernel's IOPub
 * messages: which tool calls run or wait for permission, and the session's
 * model, mode and token counts.
 *
 * Pure (no JupyterLab imports) so it is unit tested under node. Only live
 * messages feed it: cards restored from a saved notebook are history, and a
 * stale "awaiting_permission" in a file must not show as pending. The kernel's own
 * word (session info from its status comm or kernel_info_reply) comes in through
 * `setKernelInfo`: it knows the model and mode before the first answer, the
 * questions still waiting after a page reload, and the pull or merge requests it opened.
 */

import {
  FINAL_STATUSES,
  ISessionInfo,
  SESSION_MIME,
  TOOLCALL_MIME,
  parseSessionInfo,
  parseToolCall
} from '../cards/payload';
import { isRecord } from '../json';
import { IPendingQuestion, parseQuestions } from '../questions/model';

/** The parts of a Jupyter IOPub message this module reads. */
export interface IIOPubMessageLike {
  header: { msg_type: string };
  parent_header?: { msg_id?: string; msg_type?: string } | Record<string, never>;
  content: unknown;
}

export interface ICallState {
  callId: string;
  name: string;
  title: string;
  kind: string;
  status: string;
  /** msg_id of the execute_request whose turn made the call. */
  parentMsgId: string;
  /** Set when that execute_request finished while the call was not final. */
  stale: boolean;
}

const DISPLAY_TYPES = new Set(['display_data', 'update_display_data', 'execute_result']);

/** An apply of the kernel that waits for other people's approval (its team's rules). */
export interface IWaitingApproval {
  id: string;
  /** The record's own words: "waiting for 1 approval by platform". */
  waiting: string;
  rule: string;
}

/** The kernel's `approvals` list; anything malformed is left out. */
export function parseApprovals(value: unknown): IWaitingApproval[] {
  if (!Array.isArray(value)) {
    return [];
  }
  return value
    .filter(isRecord)
    .filter(item => typeof item.waiting === 'string' && item.waiting !== '')
    .map(item => ({
      id: typeof item.id === 'string' ? item.id : '',
      waiting: item.waiting as string,
      rule: typeof item.rule === 'string' ? item.rule : ''
    }));
}

/** A pull or merge request the kernel opened (its `pull_request` tool). */
export interface IOpenedRequest {
  number: number;
  /** The request's page on its forge (http or https only). */
  url: string;
  noun: 'pull request' | 'merge request';
}

const REQUEST_NOUNS = new Set(['pull request', 'merge request']);

/** The kernel's `pullRequests` list, newest last; anything malformed is left out. */
export function parsePullRequests(value: unknown): IOpenedRequest[] {
  if (!Array.isArray(value)) {
    return [];
  }
  return value
    .filter(isRecord)
    .filter(
      item =>
        Number.isInteger(item.number) &&
        (item.number as number) > 0 &&
        typeof item.noun === 'string' &&
        REQUEST_NOUNS.has(item.noun) &&
        isWebUrl(item.url)
    )
    .map(item => ({
      number: item.number as number,
      url: item.url as string,
      noun: item.noun as IOpenedRequest['noun']
    }));
}

/** Only a page's address becomes a link (never `javascript:` or `data:`). */
function isWebUrl(value: unknown): boolean {
  if (typeof value !== 'string') {
    return false;
  }
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:';
  } catch {
    return false;
  }
}

/** How the status bar names a request: `PR #12`, or `MR !7` on GitLab. */
export function requestLabel(request: IOpenedRequest): string {
  return request.noun === 'merge request' ? `MR !${request.number}` : `PR #${request.number}`;
}

/** One line of the status item's tooltip: `Pull request #12: https://...`. */
export function requestLine(request: IOpenedRequest): string {
  const sign = request.noun === 'merge request' ? '!' : '#';
  const noun = request.noun.charAt(0).toUpperCase() + request.noun.slice(1);
  return `${noun} ${sign}${request.number}: ${request.url}`;
}

/** Calls kept in memory per notebook; older ones are forgotten first. */
const MAX_CALLS = 500;

export class SessionActivity {
  private _calls = new Map<string, ICallState>();
  private _session: ISessionInfo | null = null;
  private _lastSessionId: string | null = null;
  private _seen = false;
  private _listeners = new Set<() => void>();
  private _kernelPending: number | null = null;
  private _questions: IPendingQuestion[] = [];
  private _busy: boolean | null = null;
  private _approvals: IWaitingApproval[] = [];
  private _pullRequests: IOpenedRequest[] = [];
  private _ownRequests = new Set<string>();

  /** True once any iac-kernel payload arrived (the kernel is ours). */
  get seen(): boolean {
    return this._seen;
  }

  /** The latest session info the kernel published, if any. */
  get session(): ISessionInfo | null {
    return this._session;
  }

  /** The session id from session info, or else from the latest card. */
  get sessionId(): string | null {
    return this._session?.sessionId ?? this._lastSessionId;
  }

  /** Live tool calls waiting for a permission answer, oldest first. */
  get pending(): ICallState[] {
    return this._live('awaiting_permission');
  }

  /** Live tool calls running now, oldest first. */
  get running(): ICallState[] {
    return this._live('running');
  }

  /**
   * How many questions wait: the kernel's count when it sent one (it also knows about
   * questions asked before this page loaded), else the live calls seen here.
   */
  get pendingCount(): number {
    return Math.max(this._kernelPending ?? 0, this.pending.length);
  }

  /** The questions the kernel says are waiting (empty when it does not say). */
  get questions(): IPendingQuestion[] {
    return this._questions;
  }

  /** Whether a turn runs, as the kernel last said (null: it did not say). */
  get busy(): boolean | null {
    return this._busy;
  }

  /** The kernel's applies waiting for other people's approval, as it last said. */
  get approvals(): IWaitingApproval[] {
    return this._approvals;
  }

  /** The pull or merge requests the kernel opened, newest last, as it last said. */
  get pullRequests(): IOpenedRequest[] {
    return this._pullRequests;
  }

  /** The call to show for "go to the pending question": a live one, else the kernel's. */
  get firstPendingCallId(): string | null {
    return this.pending[0]?.callId ?? this._questions[0]?.callId ?? null;
  }

  /**
   * Session info from the kernel itself (status comm push or kernel_info_reply's
   * `iac_kernel`): model and mode before the first answer, pending questions after a
   * reload. Accepts the info directly or wrapped as {session, pending, questions}.
   */
  setKernelInfo(value: unknown): boolean {
    if (!isRecord(value)) {
      return false;
    }
    const info = isRecord(value.session) ? { ...value, ...value.session } : value;
    const parsed = parseSessionInfo(info);
    if (!parsed.ok) {
      return false;
    }
    this._seen = true;
    // A turn's own summary may carry token counts the bare info lacks: keep them.
    const previous = this._session;
    const next = parsed.value;
    if (previous && previous.sessionId === next.sessionId) {
      next.usage = next.usage ?? previous.usage;
      next.turnUsage = next.turnUsage ?? previous.turnUsage;
    }
    this._session = next;
    const pending = info.pending;
    this._kernelPending =
      typeof pending === 'number' ? pending : Array.isArray(pending) ? pending.length : null;
    this._questions = parseQuestions(info.questions ?? (Array.isArray(pending) ? pending : []));
    if (this._kernelPending === null && Array.isArray(info.questions)) {
      this._kernelPending = this._questions.length;
    }
    this._busy = typeof info.busy === 'boolean' ? info.busy : null;
    this._approvals = parseApprovals(info.approvals);
    this._pullRequests = parsePullRequests(info.pullRequests);
    this._emit();
    return true;
  }

  /** Note an execute_request this page sent: its cells get their own display updates. */
  markOwnRequest(msgId: string): void {
    this._ownRequests.add(msgId);
    if (this._ownRequests.size > MAX_CALLS) {
      this._ownRequests.delete(this._ownRequests.values().next().value as string);
    }
  }

  /** Whether this page sent the execute_request `msgId`. */
  isOwnRequest(msgId: string): boolean {
    return this._ownRequests.has(msgId);
  }

  /**
   * Whether the call's card is kept current by JupyterLab itself: its turn ran from this
   * page's own request. A turn started before a reload still sends its updates to every
   * client, but JupyterLab routes them to no cell.
   */
  seesLive(callId: string): boolean {
    const call = this._calls.get(callId);
    return call !== undefined && this._ownRequests.has(call.parentMsgId);
  }

  /** Tool calls seen since the kernel (re)started. */
  get callCount(): number {
    return this._calls.size;
  }

  /** Call fn on every change; returns an unsubscribe function. */
  subscribe(fn: () => void): () => void {
    this._listeners.add(fn);
    return () => this._listeners.delete(fn);
  }

  /** Forget everything (kernel restarted or changed). */
  reset(): void {
    const hadState = this._seen || this._calls.size > 0;
    this._calls.clear();
    this._session = null;
    this._lastSessionId = null;
    this._kernelPending = null;
    this._questions = [];
    this._busy = null;
    this._approvals = [];
    this._pullRequests = [];
    if (hadState) {
      this._emit();
    }
  }

  /** Feed one IOPub message; returns whether the state changed. Never throws on bad input. */
  handle(msg: IIOPubMessageLike): boolean {
    const type = msg?.header?.msg_type;
    const content = msg?.content;
    if (!isRecord(content)) {
      return false;
    }
    let changed = false;
    if (DISPLAY_TYPES.has(type)) {
      const data = isRecord(content.data) ? content.data : {};
      const metadata = isRecord(content.metadata) ? content.metadata : {};
      if (TOOLCALL_MIME in data) {
        changed = this._onToolCall(data[TOOLCALL_MIME], msg) || changed;
      }
      // Session info may come as its own bundle or ride in any bundle's metadata.
      for (const source of [data, metadata]) {
        if (SESSION_MIME in source) {
          changed = this._onSession(source[SESSION_MIME]) || changed;
        }
      }
    } else if (type === 'status' && content.execution_state === 'idle') {
      changed = this._onIdle(msg);
    }
    if (changed) {
      this._emit();
    }
    return changed;
  }

  private _live(status: string): ICallState[] {
    return [...this._calls.values()].filter(call => call.status === status && !call.stale);
  }

  private _onToolCall(payload: unknown, msg: IIOPubMessageLike): boolean {
    const parsed = parseToolCall(payload);
    if (!parsed.ok) {
      return false;
    }
    const call = parsed.value;
    this._seen = true;
    if (call.sessionId) {
      this._lastSessionId = call.sessionId;
    }
    const previous = this._calls.get(call.callId);
    const parentMsgId = previous?.parentMsgId || parentId(msg);
    this._calls.delete(call.callId); // re-insert: Map order is recency order
    this._calls.set(call.callId, {
      callId: call.callId,
      name: call.name,
      title: call.title,
      kind: call.kind,
      status: call.status,
      parentMsgId,
      stale: false
    });
    while (this._calls.size > MAX_CALLS) {
      const oldest = this._calls.keys().next().value as string;
      this._calls.delete(oldest);
    }
    return true;
  }

  private _onSession(payload: unknown): boolean {
    const parsed = parseSessionInfo(payload);
    if (!parsed.ok) {
      return false;
    }
    this._seen = true;
    this._session = parsed.value;
    return true;
  }

  /** A finished execute_request cannot still have a running or waiting call. */
  private _onIdle(msg: IIOPubMessageLike): boolean {
    const parent = msg.parent_header as { msg_id?: string; msg_type?: string } | undefined;
    if (!parent || parent.msg_type !== 'execute_request' || !parent.msg_id) {
      return false;
    }
    let changed = false;
    for (const call of this._calls.values()) {
      if (call.parentMsgId === parent.msg_id && !FINAL_STATUSES.has(call.status) && !call.stale) {
        call.stale = true;
        changed = true;
      }
    }
    return changed;
  }

  private _emit(): void {
    for (const fn of [...this._listeners]) {
      try {
        fn();
      } catch (error) {
        console.error('iac-kernel: activity listener failed', error);
      }
    }
  }
}

function parentId(msg: IIOPubMessageLike): string {
  const parent = msg.parent_header as { msg_id?: string } | undefined;
  return typeof parent?.msg_id === 'string' ? parent.msg_id : '';
}
