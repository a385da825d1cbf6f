/**
 * Plan cards: renders `application/vnd.iac-kernel.plan+json` (a Terraform / OpenTofu
 * plan or drift check, see iac_kernel/kernel/render/plan_card.py) as a reviewable card: the
 * summary line, the plan file's identity, the review list of every changing row
 * (list.ts: replacements and deletes first, grouped by module and type, filter,
 * search, each row's attribute diff on demand, virtualised), output changes, drift and
 * failed policy checks. Values arrive masked ("(sensitive)"); the renderer only sets
 * textContent, so it is safe in untrusted notebooks.
 */

import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { appHooks } from '../cards/hooks';
import { el, tableText, withCopy } from '../dom';
import { FetchDiff, PlanList } from './list';
import {
  COLORS,
  DANGER,
  IPlan,
  IPlanCheck,
  IPlanResource,
  SYMBOLS,
  changeLine,
  moreNote,
  parsePlan,
  rowsOf,
  shown,
  why
} from './model';

function resourceRow(action: string, resource: IPlanResource, checks: IPlanCheck[]): HTMLElement {
  const row = el('tr', `iac-plan-row iac-plan-${action}`);
  row.dataset.action = action;
  const [background, color] = COLORS[action] ?? ['transparent', 'inherit'];
  row.style.background = background;
  const label = el('td', 'iac-plan-action', `${SYMBOLS[action] ?? '?'} ${action}`);
  label.style.color = color;
  label.style.whiteSpace = 'nowrap';
  if (DANGER.has(action)) {
    row.classList.add('iac-plan-danger');
    label.style.fontWeight = '600';
  }
  row.appendChild(label);
  const cell = el('td', 'iac-plan-address');
  const details = el('details', '');
  const summary = el('summary', '');
  summary.appendChild(el('code', '', resource.address));
  for (const check of checks.filter(c => c.address === resource.address)) {
    summary.appendChild(el('span', 'iac-plan-check', ` ✗ ${check.check_id ?? ''}`));
  }
  details.appendChild(summary);
  const lines = (resource.changes ?? []).map(change => changeLine(resource, change));
  details.appendChild(el('pre', 'iac-plan-diff', lines.join('\n') || '(no attribute changes)'));
  cell.appendChild(details);
  row.appendChild(cell);
  row.appendChild(el('td', 'iac-plan-reason', why(resource)));
  return row;
}

/** A resource table with fixed columns: expanding a row's diff never moves them. */
function planTable(): HTMLTableElement {
  const table = el('table', 'iac-plan-table');
  const cols = el('colgroup', '');
  for (const name of ['action', 'address', 'reason']) {
    cols.appendChild(el('col', `iac-plan-col-${name}`));
  }
  table.appendChild(cols);
  return table;
}

/** Fill `node` with the plan card (`compact`: the kernel's rows of the whole plan;
 * `fetchDiff`: asks the kernel for a row's diff the rows left out). */
export function renderPlan(
  node: HTMLElement,
  plan: IPlan,
  compact?: unknown,
  fetchDiff?: FetchDiff
): void {
  node.textContent = '';
  const card = el('div', 'iac-plan');
  const rows = rowsOf(plan, compact);
  const danger = plan.errored || rows.some(row => DANGER.has(row.action));
  card.classList.add(danger ? 'iac-plan-has-danger' : 'iac-plan-safe');
  card.appendChild(el('div', 'iac-plan-summary', plan.summary));
  if (plan.file) {
    const file = plan.file;
    card.appendChild(
      el('div', 'iac-plan-file', `plan file ${file.path} · sha256 ${file.short_hash} · ${file.time}`)
    );
  }
  for (const error of plan.errors ?? []) {
    card.appendChild(el('div', 'iac-plan-error', error));
  }
  // Rows from the kernel's compact form are the whole plan; a bounded plan says what
  // it leaves out.
  const more = compact === undefined ? moreNote(plan) : '';
  if (more) {
    for (const group of plan.groups ?? []) {
      card.appendChild(
        el('div', 'iac-plan-group', `${group.count} ${group.action} ${group.type}`)
      );
    }
  }
  const checks = plan.checks ?? [];
  if (rows.length) {
    const flags = new Map<string, string[]>();
    for (const check of checks) {
      const list = flags.get(check.address ?? '') ?? [];
      list.push(check.check_id ?? '');
      flags.set(check.address ?? '', list);
    }
    card.appendChild(new PlanList(rows, flags, more, fetchDiff).node);
  }
  const outputs = (plan.outputs ?? []).filter(o => o.action !== 'no-op');
  if (outputs.length) {
    const details = el('details', 'iac-plan-outputs');
    details.appendChild(el('summary', '', `Outputs (${outputs.length})`));
    const lines = outputs.map(o => `${o.name}: ${shown(o.before)} -> ${shown(o.after)}`);
    details.appendChild(el('pre', '', lines.join('\n')));
    card.appendChild(details);
  }
  const drift = plan.drift ?? [];
  if (drift.length) {
    const box = el('div', 'iac-plan-drift');
    const s = drift.length === 1 ? '' : 's';
    // A drift check's summary line above already says it: no second copy.
    if (!plan.summary.startsWith('Drift:')) {
      box.appendChild(el('strong', '', `Drift: ${drift.length} resource${s} changed outside Terraform`));
    }
    const table = planTable();
    for (const resource of drift) {
      table.appendChild(resourceRow('update', resource, []));
    }
    box.appendChild(withCopy(table, () => tableText(table), 'the drift table'));
    card.appendChild(box);
  }
  if (checks.length) {
    const box = el('div', 'iac-plan-checks', `Policy (checkov): ${checks.length} failed check(s)`);
    const list = el('ul', '');
    for (const check of checks) {
      list.appendChild(el('li', '', `${check.address}: ${check.check_id} ${check.name ?? ''}`));
    }
    box.appendChild(list);
    card.appendChild(box);
  } else if (plan.checks_note) {
    card.appendChild(el('div', 'iac-plan-note', `Policy: ${plan.checks_note}`));
  }
  node.appendChild(card);
}

export class PlanRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(private _options: IRenderMime.IRendererOptions) {
    super();
    this.addClass('iac-plan-widget');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    // Read once: an output model's `data` is a fresh deep copy on every read.
    const raw = model.data[this._options.mimeType] as { rows?: unknown } | null;
    const parsed = parsePlan(raw);
    if (!parsed.ok) {
      this.node.textContent = `Unreadable iac-kernel plan card: ${parsed.error}`;
      return;
    }
    const rows = raw?.rows as { key?: unknown } | undefined;
    const key = typeof rows?.key === 'string' ? rows.key : '';
    const hook = appHooks.planRow;
    const fetchDiff =
      key && hook ? (address: string) => hook(key, address, this.node) : undefined;
    renderPlan(this.node, parsed.value, rows, fetchDiff);
  }
}
