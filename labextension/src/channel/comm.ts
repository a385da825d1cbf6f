/**
 * The extension's line to one kernel: the `iac-kernel.status` comm.
 *
 * The kernel pushes its session info (model, mode, pending questions) on it from the
 * moment the comm opens, and answers requests: a call's full output, and the answer to a
 * pending permission question. Comm messages are handled while a turn runs or waits, so
 * both work mid-turn. The same session info also rides in every kernel_info_reply under
 * `iac_kernel`, which JupyterLab requests at start, restart and reconnect.
 *
 * Opening the comm also tells the kernel which of its MIME types this page renders (text
 * deltas: the answer as it is written; tool cards: the kernel then leaves the question's
 * text off its buttons, the card shows it).
 *
 * Without the comm (an older kernel), the full output falls back to running the
 * `%output CALL` magic silently and reading its output.
 */

import type { Kernel, KernelMessage } from '@jupyterlab/services';

import { TEXT_DELTA_MIME } from '../cards/deltatext';
import { TOOLCALL_MIME } from '../cards/payload';
import { isRecord } from '../json';

export const STATUS_TARGET = 'iac-kernel.status';

/** Seconds a request may wait for the kernel's reply. */
const REPLY_TIMEOUT_MS = 15_000;

interface IWaiter {
  match: (data: Record<string, unknown>) => boolean;
  resolve: (data: Record<string, unknown>) => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

export interface IChannelCallbacks {
  /** Session info (the SESSION_MIME shape plus pending/busy/questions) from the kernel. */
  onInfo: (info: unknown) => void;
  /** A tool card payload the kernel pushed because the card changed. */
  onCard?: (card: unknown) => void;
}

export class KernelChannel {
  constructor(private _callbacks: IChannelCallbacks) {}

  /** Whether the kernel has the status comm open. */
  get open(): boolean {
    return this._comm !== null;
  }

  /** Follow a (new) kernel: close the old comm, read kernel_info, open the comm. */
  attach(kernel: Kernel.IKernelConnection | null): void {
    this._close();
    this._kernel = kernel;
    if (!kernel) {
      return;
    }
    void kernel.info.then(
      reply => {
        const extra = (reply as unknown as Record<string, unknown>).iac_kernel;
        if (this._kernel === kernel && isRecord(extra)) {
          this._callbacks.onInfo(extra);
        }
      },
      () => undefined
    );
    try {
      const comm = kernel.createComm(STATUS_TARGET);
      comm.onMsg = msg => this._onMessage(msg);
      comm.onClose = () => {
        if (this._comm === comm) {
          this._comm = null;
          this._failAll('the kernel closed the status channel');
        }
      };
      // The kernel streams the agent's text as deltas to a client that renders them.
      comm.open({ renders: [TEXT_DELTA_MIME, TOOLCALL_MIME] });
      this._comm = comm;
    } catch (error) {
      console.warn('iac-kernel: cannot open the status comm', error);
      this._comm = null;
    }
  }

  /** Ask for the session info again (after a restart, say). */
  refresh(): void {
    this._send({ request: 'session_info' });
  }

  /** The whole output of a tool call, as the agent saw it. */
  async fullOutput(callId: string): Promise<string> {
    if (this._comm) {
      const reply = await this._request(
        { request: 'full_output', callId },
        data => data.type === 'full_output' && data.callId === callId
      );
      if (typeof reply.output === 'string') {
        return reply.output;
      }
      throw new Error(typeof reply.error === 'string' ? reply.error : 'no output stored');
    }
    return this._fullOutputByMagic(callId);
  }

  /** One row's attribute diff of a plan card that left it out (kernel/session/status.py). */
  async planRow(key: string, address: string): Promise<string[] | null> {
    const reply = await this._request(
      { request: 'plan_row', key, address },
      data => data.type === 'plan_row' && data.key === key && data.address === address
    );
    return Array.isArray(reply.diff) ? reply.diff.map(String) : null;
  }

  /**
   * Every display of a call of a running turn (card, question or the answer's record, the
   * apply's plan card), for a page that never saw them (kernel/session/status.py `call_card`);
   * null when no running turn has the call.
   */
  async callCard(callId: string | null, displayId: string): Promise<unknown[] | null> {
    const request: Record<string, unknown> = { request: 'call_card', displayId };
    if (callId !== null) {
      request.callId = callId;
    }
    const reply = await this._request(
      request,
      data => data.type === 'call_card' && data.displayId === displayId
    );
    return Array.isArray(reply.outputs) ? reply.outputs : null;
  }

  /** What became of a call whose card was saved while it asked (see kernel/session/status.py). */
  async callOutcome(
    callId: string,
    sessionId: string
  ): Promise<{ card: unknown; outcome: string | null }> {
    const reply = await this._request(
      { request: 'call_outcome', callId, sessionId },
      data => data.type === 'call_outcome' && data.callId === callId
    );
    return {
      card: isRecord(reply.card) ? reply.card : null,
      outcome: typeof reply.outcome === 'string' ? reply.outcome : null
    };
  }

  /** Answer a pending permission question; rejects with the kernel's reason if stale. */
  async answer(
    questionId: string,
    option: string,
    note?: string,
    values?: Record<string, unknown>
  ): Promise<void> {
    if (!this._comm) {
      throw new Error('the kernel has no status channel to answer on');
    }
    const request: Record<string, unknown> = { request: 'answer', questionId, option };
    if (note) {
      request.note = note;
    }
    if (values) {
      request.values = values;
    }
    const reply = await this._request(request, data => data.type === 'answer');
    if (reply.ok === false) {
      throw new Error(typeof reply.error === 'string' ? reply.error : 'the kernel refused');
    }
  }

  dispose(): void {
    this._close();
    this._kernel = null;
  }

  private _onMessage(msg: KernelMessage.ICommMsgMsg): void {
    const data = msg.content.data as unknown;
    if (!isRecord(data)) {
      return;
    }
    if (data.type === 'session_info') {
      this._callbacks.onInfo(data.info);
    } else if (data.type === 'card') {
      this._callbacks.onCard?.(data.card);
    }
    for (const [key, waiter] of this._waiting) {
      if (waiter.match(data)) {
        clearTimeout(waiter.timer);
        this._waiting.delete(key);
        waiter.resolve(data);
        break;
      }
    }
  }

  private _request(
    data: Record<string, unknown>,
    match: (data: Record<string, unknown>) => boolean
  ): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const key = `${++this._serial}`;
      const timer = setTimeout(() => {
        this._waiting.delete(key);
        reject(new Error('the kernel did not answer in time'));
      }, REPLY_TIMEOUT_MS);
      this._waiting.set(key, { match, resolve, reject, timer });
      if (!this._send(data)) {
        clearTimeout(timer);
        this._waiting.delete(key);
        reject(new Error('the status channel is closed'));
      }
    });
  }

  private _send(data: Record<string, unknown>): boolean {
    if (!this._comm || this._comm.isDisposed) {
      return false;
    }
    try {
      this._comm.send(data as any);
      return true;
    } catch (error) {
      console.warn('iac-kernel: status comm send failed', error);
      return false;
    }
  }

  /** Run `%output CALL` without touching any cell and collect what it prints. */
  private async _fullOutputByMagic(callId: string): Promise<string> {
    const kernel = this._kernel;
    if (!kernel) {
      throw new Error('no kernel');
    }
    const parts: string[] = [];
    const future = kernel.requestExecute({
      code: `%output ${callId}`,
      silent: false,
      store_history: false,
      allow_stdin: false
    });
    future.onIOPub = msg => {
      const content = msg.content as Record<string, unknown>;
      if (msg.header.msg_type === 'stream' && typeof content.text === 'string') {
        parts.push(content.text);
      } else if (
        ['display_data', 'execute_result'].includes(msg.header.msg_type) &&
        isRecord(content.data) &&
        typeof content.data['text/plain'] === 'string'
      ) {
        parts.push(content.data['text/plain'] as string);
      } else if (msg.header.msg_type === 'error') {
        parts.push(String(content.evalue ?? 'error'));
      }
    };
    await future.done;
    return parts.join('');
  }

  private _close(): void {
    const comm = this._comm;
    this._comm = null;
    if (comm && !comm.isDisposed) {
      try {
        comm.close();
      } catch {
        // the kernel is gone already
      }
    }
    this._failAll('the kernel changed');
  }

  private _failAll(reason: string): void {
    for (const waiter of this._waiting.values()) {
      clearTimeout(waiter.timer);
      waiter.reject(new Error(reason));
    }
    this._waiting.clear();
  }

  private _comm: Kernel.IComm | null = null;
  private _kernel: Kernel.IKernelConnection | null = null;
  private _waiting = new Map<string, IWaiter>();
  private _serial = 0;
}
