/**
 * The plan card's data (no DOM, so the unit tests run in node): the payload of
 * `application/vnd.iac-kernel.plan+json` (iac_kernel/kernel/render/plan_card.py), parsed,
 * and its rows: every changing resource in review order (replacements and deletes first,
 * then updates, then creates; by module and resource type; addresses in natural order),
 * from the kernel's compact form (`rows`, the whole plan: iac_kernel/terraform/summary.py
 * `card_rows`) or, for older payloads and terraform_plan results, from the plan's own
 * bounded `resources`; written as diff lines, filtered by action and address text, with
 * group headers for the virtualised list of list.ts. Rendered by plan.ts.
 */

export const PLAN_MIME = 'application/vnd.iac-kernel.plan+json';

export interface IPlanChange {
  path: string;
  before: unknown;
  after: unknown;
  sensitive?: boolean;
  unknown?: boolean;
  forces_replace?: boolean;
}

export interface IPlanResource {
  address: string;
  action: string;
  type?: string;
  mode?: string;
  reason?: string;
  /** The reason in words (e.g. "no longer in the configuration; forces replacement: x"). */
  why?: string;
  replace_paths?: string[];
  changes?: IPlanChange[];
}

export interface IPlanCheck {
  check_id?: string;
  name?: string;
  address?: string;
}

export interface IPlan {
  summary: string;
  file?: { path?: string; short_hash?: string; time?: string } | null;
  program?: string;
  refresh_only?: boolean;
  errored?: boolean;
  errors?: string[];
  resources: IPlanResource[];
  outputs?: { name: string; action: string; before: unknown; after: unknown }[];
  drift?: IPlanResource[];
  checks?: IPlanCheck[];
  checks_note?: string;
  /** A bounded plan (Plan.to_dict): counts by action and type, and how many rows exist. */
  groups?: { action: string; type: string; count: number }[];
  rows_total?: number;
  truncated?: boolean;
}

/** What a bounded plan leaves out, in words ('' if nothing). */
export function moreNote(plan: IPlan): string {
  if (!plan.truncated || typeof plan.rows_total !== 'number') {
    return '';
  }
  const shown = plan.resources.filter(r => r.action !== 'no-op').length;
  return (
    `Showing ${shown} of ${plan.rows_total} changing resources (replacements and deletes ` +
    'first); ask terraform_plan_detail for any other address.'
  );
}

/** Review order: what destroys data first (replacements, deletes), then updates, creates. */
export const ACTION_ORDER = ['replace', 'delete', 'update', 'create', 'read', 'forget'];
export const SYMBOLS: Record<string, string> = {
  delete: '-',
  replace: '-/+',
  create: '+',
  update: '~',
  read: '<=',
  forget: '.'
};
export const DANGER = new Set(['delete', 'replace']);
/** An accent of the theme, mixed with its text colour: darker in light themes and lighter
 * in dark ones, so the word reads on either. */
function accent(name: string, fallback: string): string {
  return `color-mix(in srgb, var(--jp-${name}, ${fallback}) 45%, var(--jp-content-font-color1, #000))`;
}

/**
 * Row colours (background, text) by action; deletes and replaces stand out. Backgrounds
 * are translucent tints: the row keeps the theme's text colour, in dark themes too.
 */
export const COLORS: Record<string, [string, string]> = {
  delete: ['rgb(248 81 73 / 15%)', accent('error-color1', '#cf222e')],
  replace: ['rgb(219 109 40 / 15%)', accent('warn-color1', '#bf8700')],
  create: ['rgb(46 160 67 / 15%)', accent('success-color1', '#1a7f37')],
  update: ['rgb(210 153 34 / 15%)', accent('warn-color1', '#bf8700')],
  read: ['rgb(56 139 253 / 15%)', accent('brand-color1', '#1f6feb')]
};

/** The plan of a payload, or an error message. */
export function parsePlan(raw: unknown): { ok: true; value: IPlan } | { ok: false; error: string } {
  if (typeof raw !== 'object' || raw === null) {
    return { ok: false, error: 'not an object' };
  }
  const plan = (raw as { plan?: unknown }).plan;
  if (typeof plan !== 'object' || plan === null) {
    return { ok: false, error: 'no "plan" object' };
  }
  const value = plan as IPlan;
  if (typeof value.summary !== 'string' || !Array.isArray(value.resources)) {
    return { ok: false, error: 'the plan has no summary or resources' };
  }
  return { ok: true, value };
}

/** Compares runs of digits as numbers: `old[2]` before `old[10]`. */
export function naturalCompare(a: string, b: string): number {
  const left = a.split(/(\d+)/);
  const right = b.split(/(\d+)/);
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    if (left[i] === right[i]) {
      continue;
    }
    if (i % 2) {
      const diff = Number(left[i]) - Number(right[i]);
      if (diff) {
        return diff;
      }
    }
    return left[i] < right[i] ? -1 : 1;
  }
  return left.length - right.length;
}

/** An action's place in the review order (unknown actions last). */
export function actionRank(action: string): number {
  const i = ACTION_ORDER.indexOf(action);
  return i < 0 ? ACTION_ORDER.length : i;
}

export function shown(value: unknown): string {
  if (value === '(sensitive)' || value === '(known after apply)') {
    return value;
  }
  const text = JSON.stringify(value);
  return text === undefined ? 'null' : text.length > 200 ? text.slice(0, 199) + '…' : text;
}

/** One attribute change as a line: `~ path: before -> after`. */
export function changeLine(resource: IPlanResource, change: IPlanChange): string {
  const mark = change.forces_replace ? '  # forces replacement' : '';
  if (resource.action === 'create' || change.before === null || change.before === undefined) {
    return `+ ${change.path} = ${shown(change.after)}${mark}`;
  }
  if (resource.action === 'delete') {
    return `- ${change.path} = ${shown(change.before)}`;
  }
  return `~ ${change.path}: ${shown(change.before)} -> ${shown(change.after)}${mark}`;
}

/** The kernel's compact rows (summary.card_rows): one list per column, strings
 * shared through tables; an address is its group's prefix + the row's name. */
export interface ICompactRows {
  v: number;
  actions: string[];
  groups: [string, string, string][];
  whys: string[];
  action: number[];
  group: number[];
  name: string[];
  why: number[];
  diff: (string | null)[];
  diffs_left_out?: number;
}

export interface IRow {
  action: string;
  address: string;
  module: string;
  type: string;
  why: string;
  /** The attribute changes as lines; null when the card does not carry them. */
  diff: string[] | null;
}

export type Entry =
  | { kind: 'group'; action: string; module: string; type: string; count: number }
  | { kind: 'row'; row: IRow };

function isCompact(value: unknown): value is ICompactRows {
  if (typeof value !== 'object' || value === null) {
    return false;
  }
  const rows = value as Partial<ICompactRows>;
  const n = Array.isArray(rows.name) ? rows.name.length : -1;
  return (
    n >= 0 &&
    [rows.action, rows.group, rows.why, rows.diff].every(
      list => Array.isArray(list) && list.length === n
    ) &&
    [rows.actions, rows.groups, rows.whys].every(Array.isArray)
  );
}

/** The module part of an address (`module.a[3]`; '' for the root module). */
export function moduleOf(address: string, type?: string, mode?: string): string {
  if (type) {
    const own = `${mode === 'data' ? 'data.' : ''}${type}.`;
    const at = address.lastIndexOf(own);
    return at > 0 ? address.slice(0, at).replace(/\.$/, '') : '';
  }
  const found = [...address.matchAll(/module\.[^.[]+(\[[^\]]*\])?/g)];
  const last = found[found.length - 1];
  return last ? address.slice(0, (last.index ?? 0) + last[0].length) : '';
}

function typeOf(resource: IPlanResource): string {
  if (resource.type) {
    return resource.type;
  }
  const own = resource.address.slice(moduleOf(resource.address).length).replace(/^\./, '');
  const parts = own.split('.');
  return parts[0] === 'data' ? parts[1] ?? '' : parts[0] ?? '';
}

/** Review order: action, module, type, then address (natural order). */
export function reviewCompare(a: IRow, b: IRow): number {
  return (
    actionRank(a.action) - actionRank(b.action) ||
    naturalCompare(a.module, b.module) ||
    (a.type < b.type ? -1 : a.type > b.type ? 1 : 0) ||
    naturalCompare(a.address, b.address)
  );
}

/** Why a resource changes, in words (the kernel's `why`, else its reason and replace paths). */
export function why(resource: IPlanResource): string {
  const parts = [resource.why ?? (resource.reason ?? '').replace(/_/g, ' ')];
  if (resource.why === undefined && resource.replace_paths?.length) {
    parts.push(`forces replacement: ${resource.replace_paths.join(', ')}`);
  }
  return parts.filter(Boolean).join(' · ');
}

/** Every changing row of a payload, in review order. */
export function rowsOf(plan: IPlan, compact: unknown): IRow[] {
  if (isCompact(compact)) {
    const { actions, groups, whys } = compact;
    return compact.name.map((name, i) => {
      const [module, type, prefix] = groups[compact.group[i]] ?? ['', '', ''];
      const diff = compact.diff[i];
      return {
        action: String(actions[compact.action[i]] ?? ''),
        address: `${prefix ?? ''}${name}`,
        module: String(module ?? ''),
        type: String(type ?? ''),
        why: String(whys[compact.why[i]] ?? ''),
        diff: typeof diff === 'string' ? (diff ? diff.split('\n') : []) : null
      };
    });
  }
  return plan.resources
    .filter(resource => resource.action !== 'no-op')
    .map(resource => ({
      action: resource.action,
      address: resource.address,
      module: moduleOf(resource.address, resource.type, resource.mode),
      type: typeOf(resource),
      why: why(resource),
      diff: (resource.changes ?? []).map(change => changeLine(resource, change))
    }))
    .sort(reviewCompare);
}

/** How many rows of each action, in review order. */
export function countsOf(rows: IRow[]): [string, number][] {
  const counts = new Map<string, number>();
  for (const row of rows) {
    counts.set(row.action, (counts.get(row.action) ?? 0) + 1);
  }
  return [...counts.entries()].sort((a, b) => actionRank(a[0]) - actionRank(b[0]));
}

/** The rows of the chosen actions (all when `actions` is empty) whose address contains
 * `query` (case-insensitive). */
export function filterRows(rows: IRow[], actions: ReadonlySet<string>, query: string): IRow[] {
  const needle = query.trim().toLowerCase();
  return rows.filter(
    row =>
      (actions.size === 0 || actions.has(row.action)) &&
      (needle === '' || row.address.toLowerCase().includes(needle))
  );
}

/** Rows with a header before each run of one action, module and type. */
export function entriesOf(rows: IRow[]): Entry[] {
  const entries: Entry[] = [];
  let header: Extract<Entry, { kind: 'group' }> | null = null;
  for (const row of rows) {
    if (
      header === null ||
      header.action !== row.action ||
      header.module !== row.module ||
      header.type !== row.type
    ) {
      header = { kind: 'group', action: row.action, module: row.module, type: row.type, count: 0 };
      entries.push(header);
    }
    header.count++;
    entries.push({ kind: 'row', row });
  }
  return entries;
}

/** A group header's words: `replace · module.a[3] · aws_instance (12)`. */
export function groupLabel(entry: Extract<Entry, { kind: 'group' }>): string {
  const module = entry.module || 'root module';
  return `${entry.action} · ${module} · ${entry.type || '(no type)'} (${entry.count})`;
}

/** "Copy the plan table": one line per row, action and address, tab-separated. */
export function rowsText(rows: IRow[]): string {
  return rows.map(row => `${row.action}\t${row.address}`).join('\n');
}
