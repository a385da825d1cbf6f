/**
 * The widgets the app plugin follows (notebook and console panels with a kernel session)
 * and what it keeps for each (its agent activity and the kernel's status channel); their
 * cells and outputs: finding a tool call's card, the outputs of a cell by its id, and
 * changing them for cards and turns this page did not see live (after a reload).
 */

import { ISessionContext } from '@jupyterlab/apputils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import { TOOLCALL_MIME, parseToolCall } from '../cards/payload';
import { SessionActivity } from '../status/activity';
import { KernelChannel } from './comm';
import { IOutputList } from './reroute';

/** A notebook panel or a console panel: anything with a kernel session. */
export type AgentWidget = Widget & { sessionContext: ISessionContext };

/** A followed widget with its agent activity and the kernel's status channel. */
export interface ITracked {
  widget: AgentWidget;
  activity: SessionActivity;
  channel: KernelChannel;
}

export function hasSession(widget: unknown): widget is AgentWidget {
  return widget instanceof Widget && 'sessionContext' in widget && !!(widget as any).sessionContext;
}

/** True for a kernel spec of ours (named iac-kernel, iac-kernel-foo, ...). */
export function isAgentKernel(widget: AgentWidget | null): boolean {
  const context = widget?.sessionContext;
  const name = context?.session?.kernel?.name ?? context?.kernelPreference.name;
  return typeof name === 'string' && name.startsWith('iac');
}

/** An output list that holds nothing: where the outputs of a cell are not found. */
export const NO_OUTPUTS: IOutputList = {
  length: 0,
  get: () => ({ toJSON: () => ({}) }),
  add: () => 0,
  set: () => undefined
};

/** The code cells' output lists of a notebook or console, with each cell's index. */
export function outputLists(widget: AgentWidget): { index: number; outputs: any }[] {
  const lists: { index: number; outputs: any }[] = [];
  if (widget instanceof NotebookPanel) {
    widget.content.widgets.forEach((cell, index) => {
      if (cell.model.type === 'code') {
        lists.push({ index, outputs: (cell.model as any).outputs });
      }
    });
  } else {
    const cells = (widget as any).console?.cells;
    for (let index = 0; index < (cells?.length ?? 0); index++) {
      const outputs = cells.get(index)?.model?.outputs;
      if (outputs) {
        lists.push({ index, outputs });
      }
    }
  }
  return lists;
}

/** Find the cell showing a tool call's card, by its output data (works with windowed notebooks). */
export function findCall(
  widget: AgentWidget,
  callId: string
): { index: number; outputs: any; o: number } | null {
  for (const { index, outputs } of outputLists(widget)) {
    for (let o = 0; o < (outputs?.length ?? 0); o++) {
      const data = outputs.get(o).data?.[TOOLCALL_MIME] as { callId?: string } | undefined;
      if (data?.callId === callId) {
        return { index, outputs, o };
      }
    }
  }
  return null;
}

/**
 * Put the kernel's newer card payload into the output model of a card this page did not
 * see live (restored from the saved notebook after a reload), so it re-renders. Live
 * cards follow their own IOPub updates; touching them would only mark the notebook dirty.
 */
export function updateCard(widget: AgentWidget, activity: SessionActivity, card: unknown): void {
  const parsed = parseToolCall(card);
  if (!parsed.ok || activity.seesLive(parsed.value.callId)) {
    return;
  }
  const found = findCall(widget, parsed.value.callId);
  if (!found) {
    return;
  }
  const output = found.outputs.get(found.o);
  const json = output.toJSON();
  if (JSON.stringify(json.data?.[TOOLCALL_MIME]) === JSON.stringify(card)) {
    return;
  }
  found.outputs.set(found.o, { ...json, data: { ...json.data, [TOOLCALL_MIME]: card } });
}

/** The model of the notebook code cell with this id (cells keep their id in the saved file). */
function codeCell(widget: AgentWidget, cellId: string): Record<string, any> | null {
  if (!(widget instanceof NotebookPanel)) {
    return null;
  }
  for (const cell of widget.content.widgets) {
    if (cell.model.id === cellId && cell.model.type === 'code') {
      return cell.model as unknown as Record<string, any>;
    }
  }
  return null;
}

/** Outputs of the notebook cell with this id. */
export function cellOutputs(widget: AgentWidget, cellId: string): IOutputList | null {
  const model = codeCell(widget, cellId);
  return model ? (model.outputs as IOutputList) : null;
}

/**
 * A cell whose turn runs from before this page loaded: `[*]` while it runs, then its
 * execution count (the cell model's public executionState and executionCount).
 */
export function markCell(widget: AgentWidget, cellId: string, running: boolean, count: number | null): void {
  const model = codeCell(widget, cellId) as { executionState: string; executionCount: number | null } | null;
  if (!model) {
    return;
  }
  model.executionState = running ? 'running' : 'idle';
  if (!running && count !== null) {
    model.executionCount = count;
  }
}
