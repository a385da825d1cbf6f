/**
 * The approvals panel's data (no DOM, so the unit tests run in node): the records the
 * server's approvals API sends (iac_kernel/server/approvals.py, `Approval.public()` plus
 * `waiting`, `yours`, `answered` and, for one record, `card`), read as untrusted JSON;
 * times in words; the plan card payload a record carries; the link that opens a record.
 */

import { ICompactRows, IPlan, PLAN_MIME } from '../plan/model';

/** The query parameter (or `#iac-approval=ID`) of a link that opens a record: the
 * webhook's link (iac_kernel/team/webhook.py LINK_PARAM). */
export const LINK_PARAM = 'iac-approval';
/** Under the server's base URL. */
export const API_PATH = 'iac-kernel/approvals';

export interface IVote {
  by: string;
  at: string | null;
  note: string | null;
}

export interface IApproval {
  id: string;
  requester: string;
  status: string;
  plan_sha256: string;
  summary: string;
  rule: string;
  required: number;
  waiting: string;
  yours: boolean;
  answered: boolean;
  approvals: IVote[];
  rejection: IVote | null;
  note: string | null;
  created_at: string | null;
  expires_at: string | null;
  decided_at: string | null;
  /** The plan card the requester saw (only when one record is asked for). */
  card?: unknown;
}

export interface IListing {
  you: string;
  approvals: IApproval[];
}

const str = (value: unknown): string => (typeof value === 'string' ? value : '');
const strOrNull = (value: unknown): string | null => (typeof value === 'string' ? value : null);

function vote(raw: unknown): IVote | null {
  if (typeof raw !== 'object' || raw === null) {
    return null;
  }
  const v = raw as Record<string, unknown>;
  return { by: str(v.by), at: strOrNull(v.at), note: strOrNull(v.note) };
}

/** One record, or null when it is not one (no id). */
export function parseApproval(raw: unknown): IApproval | null {
  if (typeof raw !== 'object' || raw === null) {
    return null;
  }
  const r = raw as Record<string, unknown>;
  if (typeof r.id !== 'string' || !r.id) {
    return null;
  }
  const votes = Array.isArray(r.approvals) ? r.approvals.map(vote) : [];
  return {
    id: r.id,
    requester: str(r.requester),
    status: str(r.status),
    plan_sha256: str(r.plan_sha256),
    summary: str(r.summary),
    rule: str(r.rule),
    required: typeof r.required === 'number' ? r.required : 0,
    waiting: str(r.waiting) || str(r.status),
    yours: r.yours === true,
    answered: r.answered === true,
    approvals: votes.filter((v): v is IVote => v !== null),
    rejection: vote(r.rejection),
    note: strOrNull(r.note),
    created_at: strOrNull(r.created_at),
    expires_at: strOrNull(r.expires_at),
    decided_at: strOrNull(r.decided_at),
    card: r.card
  };
}

/** The list answer: who you are to the server, and its records (unreadable ones left out). */
export function parseListing(raw: unknown): IListing {
  const r = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  const list = Array.isArray(r.approvals) ? r.approvals : [];
  return {
    you: str(r.you),
    approvals: list.map(parseApproval).filter((a): a is IApproval => a !== null)
  };
}

/** The error line of a refused call (the server's JSON `message`), else the HTTP status. */
export function errorLine(status: number, raw: unknown): string {
  const message = (raw as { message?: unknown } | null)?.message;
  return typeof message === 'string' && message.trim()
    ? message.trim().split('\n')[0]
    : `the server answered HTTP ${status}`;
}

/** `3 min`, `5 h`, `2 days`: a duration in the largest whole unit. */
export function span(ms: number): string {
  const minutes = Math.round(Math.abs(ms) / 60000);
  if (minutes < 1) {
    return 'less than a minute';
  }
  if (minutes < 60) {
    return `${minutes} min`;
  }
  const hours = Math.round(minutes / 60);
  if (hours < 48) {
    return `${hours} h`;
  }
  return `${Math.round(hours / 24)} days`;
}

/** `expires in 23 h` (or `expired`), from an ISO time. */
export function expiresText(iso: string | null, now: number = Date.now()): string {
  const at = iso ? Date.parse(iso) : NaN;
  if (Number.isNaN(at)) {
    return '';
  }
  return at <= now ? 'expired' : `expires in ${span(at - now)}`;
}

/** `asked 5 min ago`, from an ISO time. */
export function askedText(iso: string | null, now: number = Date.now()): string {
  const at = iso ? Date.parse(iso) : NaN;
  return Number.isNaN(at) ? '' : `asked ${span(now - at)} ago`;
}

/** What a decided record says: `approved by bob`, `rejected by bob: not now`. */
export function outcomeText(record: IApproval): string {
  if (record.status === 'pending') {
    return record.waiting;
  }
  if (record.status === 'rejected' && record.rejection) {
    const note = record.rejection.note ? `: ${record.rejection.note}` : '';
    return `rejected by ${record.rejection.by}${note}`;
  }
  if ((record.status === 'approved' || record.status === 'spent') && record.approvals.length) {
    return `${record.status} by ${record.approvals.map(v => v.by).join(', ')}`;
  }
  return record.status;
}

/** The plan card payload a record carries (`{plan, rows}`: the plan card's JSON, or a
 * bundle holding it under its MIME type), or null. The card's JSON is card.schema.json's
 * and plan_card.py's: this only finds it. */
export function planPayloadOf(card: unknown): { plan: IPlan; rows?: ICompactRows | unknown } | null {
  if (typeof card !== 'object' || card === null) {
    return null;
  }
  const inner = (card as Record<string, unknown>)[PLAN_MIME];
  const data = (typeof inner === 'object' && inner !== null ? inner : card) as Record<
    string,
    unknown
  >;
  if (typeof data.plan !== 'object' || data.plan === null) {
    return null;
  }
  return { plan: data.plan as IPlan, rows: data.rows };
}

/** The record a page's address asks to open (`?iac-approval=ID` or `#iac-approval=ID`). */
export function recordInUrl(href: string): string | null {
  let url: URL;
  try {
    url = new URL(href);
  } catch {
    return null;
  }
  const id =
    url.searchParams.get(LINK_PARAM) ??
    new URLSearchParams(url.hash.replace(/^#/, '')).get(LINK_PARAM);
  return id && /^[0-9A-Za-z_-]{1,32}$/.test(id) ? id : null;
}
