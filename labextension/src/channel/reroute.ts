/**
 * The rest of a turn that started before this page loaded.
 *
 * JupyterLab puts a cell's output where the execute_request that this page sent it is
 * waiting; a turn started before a reload (or in another tab) still sends its output to
 * every client, but JupyterLab routes it to no cell. The kernel's session info names each
 * running turn's request and cell (`turns: [{msgId, cellId}]`); this module writes that
 * turn's output into that cell's outputs: new displays are added, updates replace the
 * output they belong to (found by display id for displays seen here, by the kernel's
 * `iac_display_id` output metadata for a saved question, by call id for a saved card).
 *
 * An update for a display this page never saw (the notebook was not saved after the card
 * appeared) is not dropped silently: the page asks the kernel for the whole card of that
 * call (`onMissing`, the status comm's `call_card`), and `restore` puts the card, its
 * question or the answer's record, and the plan card of an apply's question into the cell.
 */

import { TOOLCALL_MIME } from '../cards/payload';
import { isRecord } from '../json';

export const DISPLAY_ID_KEY = 'iac_display_id';

/** The subset of JupyterLab's IOutputAreaModel used here. */
export interface IOutputList {
  readonly length: number;
  get(index: number): { toJSON(): Record<string, any> };
  add(output: Record<string, any>): number;
  set(index: number, output: Record<string, any>): void;
}

export interface IMessage {
  header: { msg_type: string; msg_id?: string };
  parent_header?: { msg_id?: string; msg_type?: string } | Record<string, never>;
  content: Record<string, any>;
}

/**
 * Called when a foreign turn is learned (running) and when it ends, with its cell and the
 * execution count the kernel gave it (null when unknown): the cell shows `[*]`, then
 * its count, as it would have without the reload.
 */
export type TurnState = (cellId: string, running: boolean, count: number | null) => void;

/**
 * Called once per call (or display) when an update names a display this page never saw:
 * the turn's request and cell, the display id, and the call id when the update is a card.
 */
export type MissingDisplay = (
  turn: { msgId: string; cellId: string },
  displayId: string,
  callId: string | null
) => void;

/** Running turns this page did not start, by execute_request id, with their cells. */
export class ForeignTurns {
  constructor(
    private _onState: TurnState = () => undefined,
    private _onMissing: MissingDisplay = () => undefined
  ) {}

  /** Learn the kernel's running turns (session info `turns`); own requests are skipped. */
  learn(info: unknown, own: (msgId: string) => boolean): void {
    const turns = isRecord(info) && Array.isArray(info.turns) ? info.turns : [];
    for (const turn of turns) {
      if (isRecord(turn) && typeof turn.msgId === 'string' && typeof turn.cellId === 'string') {
        if (turn.msgId && turn.cellId && !own(turn.msgId) && !this._cells.has(turn.msgId)) {
          const count =
            typeof turn.executionCount === 'number' && turn.executionCount > 0 ? turn.executionCount : null;
          this._cells.set(turn.msgId, turn.cellId);
          this._counts.set(turn.msgId, count);
          this._displays.set(turn.msgId, new Map());
          this._onState(turn.cellId, true, count);
        }
      }
    }
  }

  /** The cell a message of a foreign turn belongs to, or null. */
  cellOf(msg: IMessage): string | null {
    const id = msg.parent_header?.msg_id;
    return typeof id === 'string' ? (this._cells.get(id) ?? null) : null;
  }

  /**
   * Put one IOPub message of a foreign turn into its cell's outputs; returns whether it
   * changed them. The turn is forgotten when its request goes idle.
   */
  route(msg: IMessage, outputs: IOutputList): boolean {
    const id = msg.parent_header?.msg_id;
    const displays = typeof id === 'string' ? this._displays.get(id) : undefined;
    if (!id || !displays) {
      return false;
    }
    const type = msg.header.msg_type;
    if (type === 'status') {
      if (msg.content.execution_state === 'idle') {
        const cellId = this._cells.get(id);
        const count = this._counts.get(id) ?? null;
        this._cells.delete(id);
        this._counts.delete(id);
        this._displays.delete(id);
        this._asked.delete(id);
        if (cellId) {
          this._onState(cellId, false, count);
        }
      }
      return false;
    }
    const changed = routeOutput(msg, outputs, displays);
    if (!changed && type === 'update_display_data') {
      this._missing(id, msg);
    }
    return changed;
  }

  /**
   * The kernel's displays of one call (its `call_card` reply) into the cell of turn
   * `msgId`: each replaces the output it belongs to, or is added in the kernel's order.
   * Returns whether the outputs changed.
   */
  restore(msgId: string, shown: unknown, outputs: IOutputList): boolean {
    const displays = this._displays.get(msgId) ?? new Map<string, number>();
    let changed = false;
    for (const item of Array.isArray(shown) ? shown : []) {
      if (!isRecord(item) || typeof item.displayId !== 'string' || !isRecord(item.data)) {
        continue;
      }
      const output = {
        output_type: 'display_data',
        data: item.data,
        metadata: isRecord(item.metadata) ? item.metadata : {}
      };
      const index = findDisplay(outputs, displays, item.displayId, item.data);
      if (index !== null) {
        outputs.set(index, output);
      } else {
        outputs.add(output);
        displays.set(item.displayId, outputs.length - 1);
      }
      changed = true;
    }
    return changed;
  }

  private _missing(msgId: string, msg: IMessage): void {
    const content = msg.content;
    const displayId = isRecord(content.transient) ? content.transient.display_id : undefined;
    const cellId = this._cells.get(msgId);
    if (typeof displayId !== 'string' || !cellId) {
      return;
    }
    const card = isRecord(content.data) ? content.data[TOOLCALL_MIME] : undefined;
    const callId = isRecord(card) && typeof card.callId === 'string' ? card.callId : null;
    const asked = this._asked.get(msgId) ?? new Set<string>();
    this._asked.set(msgId, asked);
    // One question per call: its reply brings every display of the call.
    const key = callId !== null ? `call:${callId}` : `display:${displayId}`;
    if (asked.has(key) || asked.has(`display:${displayId}`)) {
      return;
    }
    asked.add(key);
    asked.add(`display:${displayId}`);
    this._onMissing({ msgId, cellId }, displayId, callId);
  }

  /** Forget every turn (the kernel restarted or changed); their cells go idle. */
  clear(): void {
    for (const cellId of this._cells.values()) {
      this._onState(cellId, false, null);
    }
    this._cells.clear();
    this._counts.clear();
    this._displays.clear();
    this._asked.clear();
  }

  get size(): number {
    return this._cells.size;
  }

  private _cells = new Map<string, string>();
  private _counts = new Map<string, number | null>();
  private _displays = new Map<string, Map<string, number>>();
  /** Per turn: the calls (`call:ID`) and displays (`display:ID`) already asked for. */
  private _asked = new Map<string, Set<string>>();
}

/** One message into `outputs`; `displays` maps display ids created here to indexes. */
export function routeOutput(
  msg: IMessage,
  outputs: IOutputList,
  displays: Map<string, number>
): boolean {
  const type = msg.header.msg_type;
  const content = msg.content;
  const data = isRecord(content.data) ? content.data : {};
  const metadata = isRecord(content.metadata) ? content.metadata : {};
  const displayId = isRecord(content.transient) ? content.transient.display_id : undefined;
  if (type === 'display_data' || type === 'execute_result') {
    const output: Record<string, any> = { output_type: type, data, metadata };
    if (type === 'execute_result') {
      output.execution_count = content.execution_count ?? null;
    }
    outputs.add(output);
    if (typeof displayId === 'string') {
      displays.set(displayId, outputs.length - 1);
    }
    return true;
  }
  if (type === 'update_display_data' && typeof displayId === 'string') {
    const index = findDisplay(outputs, displays, displayId, data);
    const output = { output_type: 'display_data', data, metadata };
    if (index !== null) {
      outputs.set(index, output);
      return true;
    }
    // Text that began before this page loaded: its final form (or the rest) is added.
    if (displayId.startsWith('iac-text-')) {
      outputs.add(output);
      displays.set(displayId, outputs.length - 1);
      return true;
    }
    return false;
  }
  if (type === 'stream' && typeof content.text === 'string') {
    outputs.add({ output_type: 'stream', name: content.name ?? 'stdout', text: content.text });
    return true;
  }
  if (type === 'error') {
    outputs.add({
      output_type: 'error',
      ename: String(content.ename ?? ''),
      evalue: String(content.evalue ?? ''),
      traceback: Array.isArray(content.traceback) ? content.traceback : []
    });
    return true;
  }
  return false;
}

function findDisplay(
  outputs: IOutputList,
  displays: Map<string, number>,
  displayId: string,
  data: Record<string, any>
): number | null {
  const known = displays.get(displayId);
  if (known !== undefined && known < outputs.length) {
    return known;
  }
  const callId = isRecord(data[TOOLCALL_MIME]) ? data[TOOLCALL_MIME].callId : undefined;
  for (let index = outputs.length - 1; index >= 0; index--) {
    const saved = outputs.get(index).toJSON();
    if (isRecord(saved.metadata) && saved.metadata[DISPLAY_ID_KEY] === displayId) {
      return index;
    }
    const card = isRecord(saved.data) ? saved.data[TOOLCALL_MIME] : undefined;
    if (callId !== undefined && isRecord(card) && card.callId === callId) {
      return index;
    }
  }
  return null;
}
