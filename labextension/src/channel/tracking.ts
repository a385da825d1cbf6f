/**
 * Following one notebook or console: its IOPub messages and kernel status feed its agent
 * activity, the kernel's status comm is (re)attached when the kernel changes or restarts,
 * and turns started before this page loaded write into their cells.
 */

import { NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { watchTables } from '../dom';
import { IIOPubMessageLike, SessionActivity } from '../status/activity';
import { AgentStatusItem } from '../status/statusitem';
import { KernelChannel } from './comm';
import { ForeignTurns } from './reroute';
import { settleSavedCards } from './savedcards';
import {
  AgentWidget,
  ITracked,
  NO_OUTPUTS,
  cellOutputs,
  isAgentKernel,
  markCell,
  updateCard
} from './widgets';

/** What following a widget needs from the app plugin. */
export interface ITrackHost {
  /** Every widget followed; `track` adds the widget and removes it once disposed. */
  tracked: Map<Widget, ITracked>;
  /** The activity of `entry` changed. */
  changed(entry: ITracked): void;
  /** A widget's kernel changed, or a widget was disposed (and is no longer tracked). */
  refresh(): void;
  /** A status item for a notebook's own toolbar; null where the status bar shows one. */
  toolbarItem: (() => AgentStatusItem) | null;
}

/** The kernel statuses after which the kernel is a new process. */
const RESTARTING = ['restarting', 'autorestarting', 'starting', 'dead'];

/** Follow `widget` (once) until it is disposed. */
export function track(widget: AgentWidget, host: ITrackHost): void {
  const { tracked } = host;
  if (tracked.has(widget)) {
    return;
  }
  const activity = new SessionActivity();
  // Turns started before this page loaded: their output goes into their cells.
  // A card of such a turn that this page never saw is asked of the kernel, whole.
  const foreign = new ForeignTurns(
    (cellId, running, count) => markCell(widget, cellId, running, count),
    (turn, displayId, callId) => {
      void channel.callCard(callId, displayId).then(
        shown => {
          if (shown) {
            foreign.restore(turn.msgId, shown, cellOutputs(widget, turn.cellId) ?? NO_OUTPUTS);
          }
        },
        error => console.warn('iac-kernel: cannot get the card back', error)
      );
    }
  );
  const learn = (info: unknown) => foreign.learn(info, id => activity.isOwnRequest(id));
  const channel: KernelChannel = new KernelChannel({
    onInfo: info => {
      learn(info);
      activity.setKernelInfo(info);
    },
    onCard: card => updateCard(widget, activity, card)
  });
  const entry: ITracked = { widget, activity, channel };
  tracked.set(widget, entry);
  const checked = new Set<string>();
  const stopTables = watchTables(widget.node, () => isAgentKernel(widget));
  // Without a status bar (Notebook 7), each notebook gets the item in its toolbar.
  let own: AgentStatusItem | null = null;
  if (host.toolbarItem && widget instanceof NotebookPanel) {
    own = host.toolbarItem();
    own.addClass('iac-status-toolbar');
    widget.toolbar.insertItem(10, 'iac-agent-status', own);
    own.render(activity, isAgentKernel(widget));
  }
  const unsubscribe = activity.subscribe(() => {
    host.changed(entry);
    own?.render(activity, isAgentKernel(widget));
    void settleSavedCards(entry, checked);
  });
  const context = widget.sessionContext;
  const onIOPub = (_: unknown, msg: unknown) => {
    activity.handle(msg as IIOPubMessageLike);
    const message = msg as any;
    const cellId = foreign.size ? foreign.cellOf(message) : null;
    if (cellId) {
      foreign.route(message, cellOutputs(widget, cellId) ?? NO_OUTPUTS);
    }
  };
  let restarted = false;
  const onStatus = (_: unknown, status: string) => {
    if (RESTARTING.includes(status)) {
      activity.reset();
      foreign.clear(); // the turns died with the process: their cells stop showing [*]
      restarted = true;
    } else if (status === 'idle' && restarted) {
      // A restarted kernel is a new process: it has no comm and a new session.
      restarted = false;
      channel.attach(context.session?.kernel ?? null);
    }
  };
  const onAnyMessage = (
    _: unknown,
    args: { msg: { header: { msg_id: string; msg_type: string } }; direction: string }
  ) => {
    if (args.direction === 'send' && args.msg.header.msg_type === 'execute_request') {
      activity.markOwnRequest(args.msg.header.msg_id);
    }
  };
  let watched: Kernel.IKernelConnection | null = null;
  const onKernel = () => {
    activity.reset();
    foreign.clear();
    const kernel = context.session?.kernel ?? null;
    watched?.anyMessage.disconnect(onAnyMessage);
    watched = kernel;
    kernel?.anyMessage.connect(onAnyMessage);
    channel.attach(isAgentKernel(widget) ? kernel : null);
    host.refresh();
  };
  context.iopubMessage.connect(onIOPub);
  context.statusChanged.connect(onStatus);
  context.kernelChanged.connect(onKernel);
  void context.ready.then(() => {
    if (tracked.has(widget) && !channel.open) {
      onKernel();
    }
  });
  widget.disposed.connect(() => {
    unsubscribe();
    stopTables();
    channel.dispose();
    context.iopubMessage.disconnect(onIOPub);
    context.statusChanged.disconnect(onStatus);
    context.kernelChanged.disconnect(onKernel);
    watched?.anyMessage.disconnect(onAnyMessage);
    tracked.delete(widget);
    host.refresh();
  });
}
