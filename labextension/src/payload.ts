/**
 * The kernel's MIME payloads, and their validation.
 *
 * Everything a kernel sends is untrusted input: it may come from a newer or
 * older kernel, or be hand-edited in a saved notebook. Parsers never throw;
 * they return either a normalised value (plus warnings) or a readable error.
 */

/** A tool call card, sent in display_data / update_display_data bundles. */
import { IForm, parseForm } from './formmodel';

export const TOOLCALL_MIME = 'application/vnd.iac-kernel.toolcall+json';

/** The agent session's model, mode and token usage. */
export const SESSION_MIME = 'application/vnd.iac-kernel.session+json';

/** The payload version this extension was written against. */
export const PAYLOAD_VERSION = 1;

export const TOOL_KINDS = ['read', 'edit', 'search', 'execute', 'fetch', 'other'] as const;
export type ToolKind = (typeof TOOL_KINDS)[number];

export const TOOL_STATUSES = [
  'running',
  'awaiting_permission',
  'done',
  'failed',
  'denied',
  'cancelled'
] as const;
export type KnownToolStatus = (typeof TOOL_STATUSES)[number];

/** Statuses after which a tool call cannot change any more. */
export const FINAL_STATUSES: ReadonlySet<string> = new Set(['done', 'failed', 'denied', 'cancelled']);

export interface IFileDiff {
  path: string;
  /** null for a file the tool creates. */
  oldText: string | null;
  newText: string;
}

/** The permission question a tool call asked (the kernel's "question" field). */
export interface IQuestion {
  id: string;
  /** pending | answered | cancelled (or a state a newer kernel invented). */
  state: string;
  /** A per-call question (apply, destroy, force-unlock, outside-cwd writes). */
  danger: boolean;
  /** Why the call needs approval, in words for the user. */
  reason: string;
  options: string[];
  answer: string | null;
  /** The user's words when they rejected the call with a note. */
  note: string | null;
  /** What the question asks to fill in (a typed confirmation, the agent's question). */
  form: IForm | null;
  /** Button labels by option, from the kernel (absent from older cards). */
  labels: Record<string, string>;
  /** The request's kind: "question" for the agent's own question (ask_user). */
  kind: string;
}

export interface IToolCall {
  version: number;
  callId: string;
  name: string;
  title: string;
  kind: ToolKind;
  /** One of TOOL_STATUSES, or a status a newer kernel invented (shown verbatim). */
  status: string;
  input: Record<string, unknown>;
  output: string | null;
  outputTruncated: boolean;
  /** The kernel's note on what was cut, when it sends one. */
  outputNote: string | null;
  /** Lines in the whole output (what the agent saw), when the kernel sends it. */
  outputLines: number | null;
  /** 1-based, inclusive range of hidden lines between the head and the tail. */
  hidden: { fromLine: number; toLine: number } | null;
  /** The two shown parts of a cut output (null when not cut or not sent). */
  outputHead: string | null;
  outputTail: string | null;
  /** Output is still streaming while the call runs. */
  live: boolean;
  /** Seconds the call ran (so far, while running). */
  elapsed: number | null;
  /** Epoch seconds the call started. */
  startedAt: number | null;
  question: IQuestion | null;
  diff: IFileDiff | null;
  locations: string[];
  sessionId: string;
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

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalString(
  data: Record<string, unknown>,
  key: string,
  warnings: string[]
): string | null {
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

function readVersion(data: Record<string, unknown>, warnings: string[]): number {
  const version = data.version;
  if (typeof version !== 'number' || !Number.isFinite(version)) {
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

function parseDiff(value: unknown, warnings: string[]): IFileDiff | null {
  if (value === undefined || value === null) {
    return null;
  }
  if (!isRecord(value)) {
    warnings.push('"diff" is not an object; ignored');
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
    path: typeof value.path === 'string' ? value.path : '(unknown file)',
    oldText: typeof oldText === 'string' ? oldText : null,
    newText: value.newText
  };
}

function finiteNumber(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function optionalText(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

function parseHidden(value: unknown): { fromLine: number; toLine: number } | null {
  if (!isRecord(value)) {
    return null;
  }
  const fromLine = finiteNumber(value.fromLine);
  const toLine = finiteNumber(value.toLine);
  return fromLine !== null && toLine !== null && toLine >= fromLine ? { fromLine, toLine } : null;
}

/** The question a call asked, or null when absent or unreadable. */
export function parseQuestion(value: unknown, warnings: string[]): IQuestion | null {
  if (value === undefined || value === null) {
    return null;
  }
  if (!isRecord(value)) {
    warnings.push('"question" is not an object; ignored');
    return null;
  }
  return {
    id: typeof value.id === 'string' ? value.id : '',
    state: typeof value.state === 'string' ? value.state : 'pending',
    danger: value.danger === true,
    reason: typeof value.reason === 'string' ? value.reason : '',
    options: Array.isArray(value.options)
      ? value.options.filter((item): item is string => typeof item === 'string')
      : [],
    answer: optionalText(value.answer),
    note: optionalText(value.note),
    form: parseForm(value.form),
    labels: isRecord(value.labels)
      ? Object.fromEntries(
          Object.entries(value.labels).filter((e): e is [string, string] => typeof e[1] === 'string')
        )
      : {},
    kind: typeof value.kind === 'string' ? value.kind : ''
  };
}

/** Validate and normalise a tool call payload. */
export function parseToolCall(value: unknown): ParseResult<IToolCall> {
  if (!isRecord(value)) {
    return { ok: false, error: 'tool call payload is not a JSON object' };
  }
  const warnings: string[] = [];
  const version = readVersion(value, warnings);
  for (const key of ['callId', 'name', 'status']) {
    if (typeof value[key] !== 'string' || value[key] === '') {
      return { ok: false, error: `tool call payload has no "${key}" string` };
    }
  }
  const name = value.name as string;
  const status = value.status as string;
  if (!(TOOL_STATUSES as readonly string[]).includes(status)) {
    warnings.push(`unknown status "${status}"`);
  }
  let kind: ToolKind = 'other';
  if ((TOOL_KINDS as readonly unknown[]).includes(value.kind)) {
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
  const locations = Array.isArray(value.locations)
    ? value.locations.filter((item): item is string => typeof item === 'string')
    : [];
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
      locations,
      sessionId: optionalString(value, 'sessionId', warnings) ?? ''
    }
  };
}

function count(data: Record<string, unknown>, ...keys: string[]): number {
  for (const key of keys) {
    const value = data[key];
    if (typeof value === 'number' && Number.isFinite(value) && value >= 0) {
      return value;
    }
  }
  return 0;
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
  const sessionId = typeof value.sessionId === 'string' ? value.sessionId : '';
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

export { countLines, formatCount, formatElapsed, formatTokens, hiddenNote } from './format';
