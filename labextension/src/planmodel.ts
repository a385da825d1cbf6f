/**
 * The plan card's data (no DOM): the payload of `application/vnd.iac-kernel.plan+json`
 * (iac_kernel/kernel/plan_card.py), parsed, grouped by action (replacements and deletes
 * first) and written as diff lines. Rendered by plan.ts.
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

