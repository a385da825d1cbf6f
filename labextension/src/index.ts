/**
 * App plugin: follows the agent activity of every iac-kernel notebook and console
 * (IOPub messages plus the kernel's status comm, `channel/tracking.ts`), shows it in the
 * status bar (JupyterLab) and the page title, serves the cards' hooks
 * (`channel/cardhooks.ts`), and adds a command that goes to the question waiting for an
 * answer (`channel/gotopending.ts`). The renderers are the other entry point (`mime.ts`).
 *
 * The parts, each a folder, import only those below them:
 *
 *   channel/    the kernel channel: the status comm, following a widget's kernel, turns
 *               started before a reload, cards saved mid-question, the cards' hooks
 *   status/     live session activity, the status bar item, page title, turn footer
 *   plan/       the plan card: review list, filters, each row's diff on demand
 *   cards/      the tool card (payload, DOM, output, diff) and the streamed text
 *   questions/  questions and their forms: model, form view, answer dialog, keys
 *   approvals/  the approver's side: the team's pending approvals (its own plugin)
 *   dom.ts, json.ts   the element helper and Copy buttons; readers of untrusted JSON
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';
import { Widget } from '@lumino/widgets';

import { approvalsPlugin } from './approvals/plugin';
import { setCardHooks } from './channel/cardhooks';
import { GOTO_PENDING, addGoToPending, goToPending } from './channel/gotopending';
import { track } from './channel/tracking';
import { ITracked, hasSession, isAgentKernel } from './channel/widgets';
import { installQuestionKeys } from './questions/keys';
import { AgentStatusItem } from './status/statusitem';
import { watchTitle } from './status/title';

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

    const statusItem = () => new AgentStatusItem(() => goToPending(app));
    const item = statusItem();
    const markTitle = watchTitle(() =>
      [...tracked.values()].reduce((sum, entry) => sum + entry.activity.pendingCount, 0)
    );
    const refresh = () => {
      const now = current();
      item.render(now?.activity ?? null, isAgentKernel(now?.widget ?? null));
      app.commands.notifyCommandChanged(GOTO_PENDING);
      markTitle();
    };

    const host = {
      tracked,
      changed: (entry: ITracked) => (current() === entry ? refresh() : markTitle()),
      refresh,
      toolbarItem: statusBar ? null : statusItem
    };
    tracker.widgetAdded.connect((_, panel) => track(panel, host));
    tracker.forEach(panel => track(panel, host));
    tracker.currentChanged.connect(refresh);
    // Consoles (and any other kernel-backed widget) are tracked when they come to the front.
    const shell = app.shell as unknown as {
      currentChanged?: { connect: (fn: (sender: unknown, args: unknown) => void) => void };
    };
    shell.currentChanged?.connect(() => {
      const widget = app.shell.currentWidget;
      if (hasSession(widget)) {
        track(widget, host);
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
    setCardHooks(app, entryOf, current);
    addGoToPending(app, current, palette);

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

export default [plugin, approvalsPlugin];
