/**
 * The plan card's rows (no DOM): every changing resource of the plan, in review order
 * (replacements and deletes first, then updates, then creates; by module and resource
 * type; addresses in natural order), from the kernel's compact form (`rows`, the whole
 * plan: iac_kernel/terraform/plan_rows.py) or, for older payloads and terraform_plan
 * results, from the plan's own bounded `resources`. Filtered by action and address
 * text, with group headers, for the virtualised list of planlist.ts.
 */

import {
  IPlan,
  IPlanResource,
  actionRank,
  changeLine,
  naturalCompare
} from './planmodel';

/** The kernel's compact rows (plan_rows.compact_rows): one list per column, strings
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

function why(resource: IPlanResource): string {
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
