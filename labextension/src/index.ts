/**
 * App plugin: follows the agent activity of every iac-kernel notebook and console
 * (IOPub messages plus the kernel's status comm), shows it in the status bar
 * (JupyterLab), fetches full outputs for the cards, and adds a command that jumps to
 * the question waiting for an answer, or asks it in a dialog when this page no longer
 * has the live card (after a reload).
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, ISessionContext } from '@jupyterlab/apputils';
import { PageConfig, PathExt } from '@jupyterlab/coreutils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';
import type { Kernel } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { IIOPubMessageLike, SessionActivity } from './activity';
import { askQuestion } from './answer';
import { KernelChannel } from './channel';
import { installQuestionKeys } from './keys';
import { appHooks } from './hooks';
import { TOOLCALL_MIME, parseToolCall } from './payload';
import { DISPLAY_ID_KEY, ForeignTurns, IOutputList } from './reroute';
import { staleCard, staleFallback } from './stale';
import { watchTables } from './tablecopy';
import { AgentStatusItem } from './statusitem';

const GOTO_PENDING = 'iac-kernel:go-to-permission-request';

/** The page title's marker while questions wait ("(1 waiting) agent.ipynb - JupyterLab"). */
const TITLE_MARK = /^\(\d+ waiting\) /;

export function markedTitle(title: string, waiting: number): string {
  const bare = title.replace(TITLE_MARK, '');
  return waiting > 0 ? `(${waiting} waiting) ${bare}` : bare;
}

/** A notebook panel or a console panel: anything with a kernel session. */
type AgentWidget = Widget & { sessionContext: ISessionContext };

interface ITracked {
  widget: AgentWidget;
  activity: SessionActivity;
  channel: KernelChannel;
}

function hasSession(widget: unknown): widget is AgentWidget {
  return widget instanceof Widget && 'sessionContext' in widget && !!(widget as any).sessionContext;
}

/** True for a kernel spec of ours (named iac-kernel, iac-kernel-foo, ...). */
function isAgentKernel(widget: AgentWidget | null): boolean {
  const context = widget?.sessionContext;
  const name = context?.session?.kernel?.name ?? context?.kernelPreference.name;
  return typeof name === 'string' && name.startsWith('iac');
}

/** "/srv/work/main.tf:12" -> path relative to the server root, or null when outside it. */
export function serverPath(location: string, notebookDir: string, serverRoot: string): string | null {
  const path = location.replace(/:\d+(:\d+)?$/, '');
  if (path.startsWith('~')) {
    return null; // the kernel shows home-relative paths as "~/..."; not under the server root
  }
  if (!path.startsWith('/')) {
    return PathExt.normalize(PathExt.join(notebookDir, path));
  }
  const root = serverRoot.replace(/\/+$/, '');
  if (!root || !path.startsWith(`${root}/`)) {
    return null;
  }
  return path.slice(root.length + 1);
}

/** The code cells' output lists of a notebook or console, with each cell's index. */
function outputLists(widget: AgentWidget): { index: number; outputs: any }[] {
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
function findCall(widget: AgentWidget, callId: string): { index: number; outputs: any; o: number } | null {
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
function updateCard(widget: AgentWidget, activity: SessionActivity, card: unknown): void {
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

/** Outputs of the notebook cell with this id (cells keep their id in the saved file). */
function cellOutputs(widget: AgentWidget, cellId: string): IOutputList | null {
  if (!(widget instanceof NotebookPanel)) {
    return null;
  }
  for (const cell of widget.content.widgets) {
    if (cell.model.id === cellId && cell.model.type === 'code') {
      return (cell.model as any).outputs as IOutputList;
    }
  }
  return null;
}

/**
 * A cell whose turn runs from before this page loaded: `[*]` while it runs, then its
 * execution count (the cell model's public executionState and executionCount).
 */
function markCell(widget: AgentWidget, cellId: string, running: boolean, count: number | null): void {
  if (!(widget instanceof NotebookPanel)) {
    return;
  }
  for (const cell of widget.content.widgets) {
    if (cell.model.id === cellId && cell.model.type === 'code') {
      const model = cell.model as unknown as { executionState: string; executionCount: number | null };
      model.executionState = running ? 'running' : 'idle';
      if (!running && count !== null) {
        model.executionCount = count;
      }
      return;
    }
  }
}

const NO_OUTPUTS: IOutputList = { length: 0, get: () => ({ toJSON: () => ({}) }), add: () => 0, set: () => undefined };

const WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json';
const SAVED_BUTTONS_NOTE = {
  'text/markdown': '_(The buttons of a question that waited when this notebook was saved; it is no longer asked: the card above says what became of the call.)_',
  'text/plain': '(buttons of a question saved while it waited; no longer asked)'
};

/** A question's buttons (ipywidgets) saved in the notebook, as the kernel marks them. */
function isSavedButtons(output: Record<string, any>): boolean {
  const id = output.metadata?.[DISPLAY_ID_KEY];
  return typeof id === 'string' && id.startsWith('iac-permission-') && WIDGET_VIEW in (output.data ?? {});
}

/**
 * Cards saved while their question waited: when the kernel runs no turn, no question can
 * wait, so each such card asks the kernel what became of its call and says so.
 */
async function settleSavedCards(entry: ITracked, checked: Set<string>): Promise<void> {
  const { widget, activity, channel } = entry;
  if (!(widget instanceof NotebookPanel) || !channel.open || activity.busy !== false) {
    return;
  }
  const asking = new Set(activity.questions.map(q => q.callId));
  const stale: { callId: string; sessionId: string }[] = [];
  for (const { outputs } of outputLists(widget)) {
    for (let o = 0; o < (outputs?.length ?? 0); o++) {
      const saved = outputs.get(o).toJSON();
      if (isSavedButtons(saved)) {
        // Buttons of a question nobody asks any more: their widgets are gone with it.
        outputs.set(o, { ...saved, data: SAVED_BUTTONS_NOTE });
        continue;
      }
      const card = outputs.get(o).data?.[TOOLCALL_MIME] as Record<string, unknown> | undefined;
      const callId = typeof card?.callId === 'string' ? card.callId : '';
      if (card?.status === 'awaiting_permission' && callId && !asking.has(callId) && !checked.has(callId)) {
        checked.add(callId);
        stale.push({ callId, sessionId: typeof card.sessionId === 'string' ? card.sessionId : '' });
      }
    }
  }
  for (const { callId, sessionId } of stale) {
    let reply: { card: unknown; outcome: string | null };
    try {
      reply = await channel.callOutcome(callId, sessionId);
    } catch {
      checked.delete(callId);
      continue;
    }
    const found = findCall(widget, callId);
    if (!found || reply.outcome === 'awaiting_permission') {
      checked.delete(callId);
      continue;
    }
    const json = found.outputs.get(found.o).toJSON();
    const saved = json.data?.[TOOLCALL_MIME];
    if (!saved || saved.status !== 'awaiting_permission') {
      continue;
    }
    const card = (reply.card as Record<string, any> | null) ?? staleCard(saved, reply.outcome);
    // The saved text/html and text/plain said "awaiting permission": they follow suit.
    const data = { ...json.data, ...staleFallback(card), [TOOLCALL_MIME]: card };
    found.outputs.set(found.o, { ...json, data });
  }
}

/** Whether the output area of a call's card shows the question's buttons. */
function hasButtons(widget: AgentWidget, callId: string): boolean {
  const card = widget.node.querySelector<HTMLElement>(
    `.iac-toolcard[data-call-id="${CSS.escape(callId)}"]`
  );
  const area = card?.closest('.jp-OutputArea');
  return !!area?.querySelector('.jupyter-widgets button');
}

/** Scroll to a call's card and flash it, leaving the notebook in command mode. */
async function revealCall(widget: AgentWidget, callId: string): Promise<boolean> {
  const found = findCall(widget, callId);
  if (widget instanceof NotebookPanel) {
    if (!found) {
      return false;
    }
    const notebook = widget.content;
    notebook.mode = 'command';
    notebook.activeCellIndex = found.index;
    await notebook.scrollToCell(notebook.widgets[found.index], 'center');
    notebook.mode = 'command';
    notebook.activate();
  }
  const card = widget.node.querySelector<HTMLElement>(
    `.iac-toolcard[data-call-id="${CSS.escape(callId)}"]`
  );
  if (!card) {
    return found !== null;
  }
  card.scrollIntoView({ block: 'center' });
  card.classList.remove('iac-toolcard-flash');
  void card.offsetWidth; // restart the animation
  card.classList.add('iac-toolcard-flash');
  return true;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: '@iac-kernel/jupyterlab:activity',
  description:
    'Agent session status (model, mode, tokens, pending permissions) for iac-kernel notebooks and consoles.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [IStatusBar, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    statusBar: IStatusBar | null,
    palette: ICommandPalette | null
  ) => {
    const tracked = new Map<Widget, ITracked>();
    installQuestionKeys(document);
    let lastAgent: ITracked | null = null;

    const current = (): ITracked | null => {
      const shellWidget = app.shell.currentWidget;
      const now =
        (shellWidget && tracked.get(shellWidget)) ||
        (tracker.currentWidget && tracked.get(tracker.currentWidget)) ||
        null;
      // The status bar keeps showing the last agent notebook/console while, say, a file
      // editor opened from a card is in front.
      if (now) {
        lastAgent = now;
      } else if (lastAgent && !tracked.has(lastAgent.widget)) {
        lastAgent = null;
      }
      return now ?? lastAgent;
    };

    const item = new AgentStatusItem(() => {
      if (app.commands.isEnabled(GOTO_PENDING)) {
        void app.commands.execute(GOTO_PENDING);
      }
    });
    // The page title shows a marker while any question waits; JupyterLab rewrites the
    // title when the current tab changes, so the marker is put back after it.
    const waitingCount = () =>
      [...tracked.values()].reduce((sum, entry) => sum + entry.activity.pendingCount, 0);
    const markTitle = () => {
      const next = markedTitle(document.title, waitingCount());
      if (next !== document.title) {
        document.title = next;
      }
    };
    const titleNode = document.querySelector('title');
    if (titleNode) {
      new MutationObserver(markTitle).observe(titleNode, { childList: true, characterData: true, subtree: true });
    }
    const refresh = () => {
      const now = current();
      item.render(now?.activity ?? null, isAgentKernel(now?.widget ?? null));
      app.commands.notifyCommandChanged(GOTO_PENDING);
      markTitle();
    };

    const track = (widget: AgentWidget): void => {
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
      if (!statusBar && widget instanceof NotebookPanel) {
        own = new AgentStatusItem(() => {
          if (app.commands.isEnabled(GOTO_PENDING)) {
            void app.commands.execute(GOTO_PENDING);
          }
        });
        own.addClass('iac-status-toolbar');
        widget.toolbar.insertItem(10, 'iac-agent-status', own);
        own.render(activity, isAgentKernel(widget));
      }
      const unsubscribe = activity.subscribe(() => {
        if (current() === entry) {
          refresh();
        } else {
          markTitle();
        }
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
        if (status === 'restarting' || status === 'autorestarting' || status === 'starting' || status === 'dead') {
          activity.reset();
          foreign.clear(); // the turns died with the process: their cells stop showing [*]
          restarted = true;
        } else if (status === 'idle' && restarted) {
          // A restarted kernel is a new process: it has no comm and a new session.
          restarted = false;
          channel.attach(context.session?.kernel ?? null);
        }
      };
      const onAnyMessage = (_: unknown, args: { msg: { header: { msg_id: string; msg_type: string } }; direction: string }) => {
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
        refresh();
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
        refresh();
      });
    };

    tracker.widgetAdded.connect((_, panel) => track(panel));
    tracker.forEach(panel => track(panel));
    tracker.currentChanged.connect(refresh);
    // Consoles (and any other kernel-backed widget) are tracked when they come to the front.
    const shell = app.shell as unknown as {
      currentChanged?: { connect: (fn: (sender: unknown, args: unknown) => void) => void };
    };
    shell.currentChanged?.connect(() => {
      const widget = app.shell.currentWidget;
      if (hasSession(widget)) {
        track(widget);
      }
      refresh();
    });

    const entryOf = (node: HTMLElement): ITracked | null => {
      for (const entry of tracked.values()) {
        if (entry.widget.node.contains(node)) {
          return entry;
        }
      }
      return current();
    };

    appHooks.fullOutput = (callId, node) => {
      const entry = entryOf(node);
      if (!entry) {
        return Promise.reject(new Error('this card is not in a notebook with a running kernel'));
      }
      return entry.channel.fullOutput(callId);
    };

    appHooks.answer = async (node, questionId, option, note, values) => {
      const entry = entryOf(node);
      if (!entry || !entry.channel.open) {
        throw new Error('this card is not in a notebook with a running kernel');
      }
      await entry.channel.answer(questionId, option, note, values);
      entry.channel.refresh();
    };

    appHooks.planRow = (key, address, node) => {
      const entry = entryOf(node);
      if (!entry) {
        return Promise.reject(new Error('this card is not in a notebook with a running kernel'));
      }
      return entry.channel.planRow(key, address);
    };

    app.commands.addCommand(GOTO_PENDING, {
      label: 'Go to Agent Permission Request',
      caption: 'Scroll to the tool call that waits for Allow / Reject (or answer it here)',
      isEnabled: () => (current()?.activity.pendingCount ?? 0) > 0,
      execute: async () => {
        const now = current();
        const callId = now?.activity.firstPendingCallId;
        if (!now || !callId) {
          return false;
        }
        if (now.widget instanceof Widget && app.shell.currentWidget !== now.widget) {
          app.shell.activateById(now.widget.id);
        }
        const shown = await revealCall(now.widget, callId);
        // This page saw the question live and its buttons are under the card. (A card
        // update seen after a reload, e.g. its heartbeat, brings the card back but not
        // the buttons: then the question is asked here.)
        if (
          now.activity.pending.some(call => call.callId === callId) &&
          hasButtons(now.widget, callId)
        ) {
          return shown;
        }
        // Asked before this page loaded: answer it here, on the kernel's status channel.
        const question = now.activity.questions.find(q => q.callId === callId);
        if (question && now.channel.open) {
          await askQuestion(question, (option, note, values) =>
            now.channel.answer(question.id, option, note, values)
          );
          now.channel.refresh();
          return true;
        }
        return shown;
      }
    });
    palette?.addItem({ command: GOTO_PENDING, category: 'iac-kernel' });

    appHooks.openLocation = location => {
      const widget = current()?.widget;
      const path = widget && 'context' in widget ? (widget as any).context?.path : undefined;
      const notebookDir = typeof path === 'string' ? PathExt.dirname(path) : '';
      const target = serverPath(location, notebookDir, PageConfig.getOption('serverRoot'));
      if (target === null) {
        return false;
      }
      void app.commands.execute('docmanager:open', { path: target });
      return true;
    };

    if (statusBar) {
      statusBar.registerStatusItem('@iac-kernel/jupyterlab:status', {
        item,
        align: 'left',
        rank: 5,
        isActive: () => item.active,
        activeStateChanged: item.activeStateChanged
      });
    }
    refresh();
  }
};

export default plugin;
