/**
 * The kernel's tool-card and session payloads, and their validation.
 *
 * The tool card's shape is the kernel's card.schema.json (package.json `config.cardSchema`);
 * its types here are generated from it (../schema.ts), so this reader names only fields the
 * schema has, and the extension's tests check their payloads against the same file.
 * Everything a kernel sends is untrusted input: it may come from a newer or older kernel,
 * or be hand-edited in a saved notebook. Parsers never throw; they return either a
 * normalised value (plus warnings) or a readable error.
 */

import { Loose, count, finiteNumber, isRecord, optionalText, strings } from '../json';
import { IQuestionBase, questionBase } from '../questions/model';
import type { QuestionPayload, ToolCallPayload } from '../schema';

/** A tool call card, sent in display_data / update_display_data bundles. */
export const TOOLCALL_MIME = 'application/vnd.iac-kernel.toolcall+json';

/** The agent session's model, mode and token usage. */
export const SESSION_MIME = 'application/vnd.iac-kernel.session+json';

/** The payload version this extension was written against. */
export const PAYLOAD_VERSION = 1;

export type ToolKind = ToolCallPayload['kind'];
export type ToolStatus = ToolCallPayload['status'];

/** Every tool kind of the schema (the compiler checks this list against it). */
const KINDS: Record<ToolKind, null> = {
  read: null,
  edit: null,
  search: null,
  execute: null,
  fetch: null,
  other: null
};
export const TOOL_KINDS = Object.keys(KINDS) as ToolKind[];

/** Every status of the schema, and whether the call can still change after it. */
const STATUSES: Record<ToolStatus, 'live' | 'final'> = {
  running: 'live',
  awaiting_permission: 'live',
  done: 'final',
  failed: 'final',
  denied: 'final',
  cancelled: 'final'
};
export const TOOL_STATUSES = Object.keys(STATUSES) as ToolStatus[];
/** Statuses after which a tool call cannot change any more. */
export const FINAL_STATUSES: ReadonlySet<string> = new Set(
  TOOL_STATUSES.filter(status => STATUSES[status] === 'final')
);

export type IFileDiff = NonNullable<ToolCallPayload['diff']>;

/** The permission question a tool call asked (the kernel's "question" field). */
export interface IQuestion extends IQuestionBase, Pick<QuestionPayload, 'answer' | 'note' | 'kind'> {
  /** pending | answered | cancelled (or a state a newer kernel invented). */
  state: string;
}

/**
 * A tool call as the card shows it: the payload's fields, read leniently. The payload's
 * `fullOutput` (the magic that prints the whole output, for other frontends) is not read:
 * the card fetches the output over the status comm.
 */
export interface IToolCall
  extends Pick<
    ToolCallPayload,
    | 'callId'
    | 'name'
    | 'title'
    | 'kind'
    | 'input'
    | 'output'
    | 'outputTruncated'
    | 'outputNote'
    | 'hidden'
    | 'outputHead'
    | 'outputTail'
    | 'live'
    | 'elapsed'
    | 'startedAt'
    | 'diff'
    | 'locations'
    | 'sessionId'
  > {
  /** The payload's version (a newer one is read as well as it can be, with a warning). */
  version: number;
  /** One of TOOL_STATUSES, or a status a newer kernel invented (shown verbatim). */
  status: string;
  /** Lines in the whole output (what the agent saw), when the kernel sends it. */
  outputLines: number | null;
  question: IQuestion | null;
}

export interface IUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  totalTokens: number;
}

export interface ISessionInfo {
  version: number;
  sessionId: string;
  model: string | null;
  mode: string | null;
  title: string | null;
  cwd: string | null;
  /** Session totals, over every turn. */
  usage: IUsage | null;
  /** The last turn only, when the kernel sends it. */
  turnUsage: IUsage | null;
  /** Permission questions waiting (the kernel's live count), when it sends one. */
  pending: number | null;
  /** A turn is running, when the kernel says so. */
  busy: boolean | null;
}

export type ParseResult<T> =
  | { ok: true; value: T; warnings: string[] }
  | { ok: false; error: string };

function optionalString<T>(data: Loose<T>, key: keyof T & string, warnings: string[]): string | null {
  const value = data[key];
  if (value === undefined || value === null) {
    return null;
  }
  if (typeof value !== 'string') {
    warnings.push(`"${key}" should be a string, got ${typeof value}`);
    return String(value);
  }
  return value;
}

function readVersion(data: { version?: unknown }, warnings: string[]): number {
  const version = finiteNumber(data.version);
  if (version === null) {
    warnings.push('payload has no numeric "version"; reading it as version 1');
    return PAYLOAD_VERSION;
  }
  if (version > PAYLOAD_VERSION) {
    warnings.push(
      `payload version ${version} is newer than this extension understands ` +
        `(${PAYLOAD_VERSION}); upgrade iac-kernel's JupyterLab extension`
    );
  }
  return version;
}

/** An object field that may be null; anything else is ignored with a warning. */
function optionalRecord(
  value: unknown,
  key: string,
  warnings: string[]
): Record<string, unknown> | null {
  if (value === undefined || value === null) {
    return null;
  }
  if (!isRecord(value)) {
    warnings.push(`"${key}" is not an object; ignored`);
    return null;
  }
  return value;
}

function parseDiff(raw: unknown, warnings: string[]): IFileDiff | null {
  const value: Loose<IFileDiff> | null = optionalRecord(raw, 'diff', warnings);
  if (value === null) {
    return null;
  }
  if (typeof value.newText !== 'string') {
    warnings.push('"diff.newText" is not a string; diff ignored');
    return null;
  }
  const oldText = value.oldText;
  if (oldText !== null && oldText !== undefined && typeof oldText !== 'string') {
    warnings.push('"diff.oldText" is not a string; diff ignored');
    return null;
  }
  return {
    path: optionalText(value.path) ?? '(unknown file)',
    oldText: optionalText(oldText),
    newText: value.newText
  };
}

function parseHidden(raw: unknown): IToolCall['hidden'] {
  if (!isRecord(raw)) {
    return null;
  }
  const value: Loose<NonNullable<IToolCall['hidden']>> = raw;
  const fromLine = finiteNumber(value.fromLine);
  const toLine = finiteNumber(value.toLine);
  return fromLine !== null && toLine !== null && toLine >= fromLine ? { fromLine, toLine } : null;
}

/** The question a call asked, or null when absent or unreadable. */
export function parseQuestion(raw: unknown, warnings: string[]): IQuestion | null {
  const value: Loose<QuestionPayload> | null = optionalRecord(raw, 'question', warnings);
  if (value === null) {
    return null;
  }
  return {
    ...questionBase(value),
    state: optionalText(value.state) ?? 'pending',
    answer: optionalText(value.answer),
    note: optionalText(value.note),
    kind: optionalText(value.kind) ?? ''
  };
}

/** Validate and normalise a tool call payload. */
export function parseToolCall(raw: unknown): ParseResult<IToolCall> {
  if (!isRecord(raw)) {
    return { ok: false, error: 'tool call payload is not a JSON object' };
  }
  const value: Loose<ToolCallPayload> = raw;
  const warnings: string[] = [];
  const version = readVersion(value, warnings);
  for (const key of ['callId', 'name', 'status'] as const) {
    if (typeof value[key] !== 'string' || value[key] === '') {
      return { ok: false, error: `tool call payload has no "${key}" string` };
    }
  }
  const name = value.name as string;
  const status = value.status as string;
  if (!(TOOL_STATUSES as string[]).includes(status)) {
    warnings.push(`unknown status "${status}"`);
  }
  let kind: ToolKind = 'other';
  if ((TOOL_KINDS as unknown[]).includes(value.kind)) {
    kind = value.kind as ToolKind;
  } else if (value.kind !== undefined) {
    warnings.push(`unknown kind "${String(value.kind)}", shown as "other"`);
  }
  let input: Record<string, unknown> = {};
  if (isRecord(value.input)) {
    input = value.input;
  } else if (value.input !== undefined && value.input !== null) {
    warnings.push('"input" is not an object');
    input = { value: value.input };
  }
  let output: string | null = null;
  if (typeof value.output === 'string') {
    output = value.output;
  } else if (value.output !== undefined && value.output !== null) {
    warnings.push('"output" is not a string');
    output = JSON.stringify(value.output, null, 2);
  }
  const title = optionalString(value, 'title', warnings);
  return {
    ok: true,
    warnings,
    value: {
      version,
      callId: value.callId as string,
      name,
      title: title && title.trim() ? title : name,
      kind,
      status,
      input,
      output,
      outputTruncated: value.outputTruncated === true,
      outputNote: optionalText(value.outputNote),
      outputLines: finiteNumber(value.outputLines),
      hidden: parseHidden(value.hidden),
      outputHead: optionalText(value.outputHead),
      outputTail: optionalText(value.outputTail),
      live: value.live === true,
      elapsed: finiteNumber(value.elapsed),
      startedAt: finiteNumber(value.startedAt),
      question: parseQuestion(value.question, warnings),
      diff: parseDiff(value.diff, warnings),
      locations: strings(value.locations),
      sessionId: optionalString(value, 'sessionId', warnings) ?? ''
    }
  };
}

/**
 * Read token counts; accepts camelCase and the core's snake_case
 * (`Usage.to_dict()`), so the kernel can pass either.
 */
export function parseUsage(value: unknown): IUsage | null {
  if (!isRecord(value)) {
    return null;
  }
  const usage: IUsage = {
    inputTokens: count(value, 'inputTokens', 'input_tokens'),
    outputTokens: count(value, 'outputTokens', 'output_tokens'),
    cacheReadTokens: count(value, 'cacheReadTokens', 'cache_read_tokens'),
    cacheWriteTokens: count(value, 'cacheWriteTokens', 'cache_write_tokens'),
    totalTokens: count(value, 'totalTokens', 'total_tokens')
  };
  if (usage.totalTokens === 0) {
    usage.totalTokens =
      usage.inputTokens + usage.outputTokens + usage.cacheReadTokens + usage.cacheWriteTokens;
  }
  return usage;
}

/** Validate and normalise a session info payload. */
export function parseSessionInfo(value: unknown): ParseResult<ISessionInfo> {
  if (!isRecord(value)) {
    return { ok: false, error: 'session payload is not a JSON object' };
  }
  const warnings: string[] = [];
  const version = readVersion(value, warnings);
  // Before the first prompt the kernel has no session yet, but model and mode are known.
  const sessionId = optionalText(value.sessionId) ?? '';
  if (!sessionId && typeof value.model !== 'string' && typeof value.mode !== 'string') {
    return { ok: false, error: 'session payload has no "sessionId", "model" or "mode"' };
  }
  return {
    ok: true,
    warnings,
    value: {
      version,
      sessionId,
      model: optionalString(value, 'model', warnings),
      mode: optionalString(value, 'mode', warnings),
      title: optionalString(value, 'title', warnings),
      cwd: optionalString(value, 'cwd', warnings),
      usage: parseUsage(value.usage),
      turnUsage: parseUsage(value.turnUsage),
      pending: finiteNumber(value.pending),
      busy: typeof value.busy === 'boolean' ? value.busy : null
    }
  };
}
