/**
 * App plugin: tracks each notebook's agent activity from its kernel's IOPub
 * stream, shows it in the status bar (JupyterLab), and adds a command that
 * jumps to the tool call waiting for permission (JupyterLab and Notebook 7).
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { PageConfig, PathExt } from '@jupyterlab/coreutils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';

import { IIOPubMessageLike, SessionActivity } from './activity';
import { appHooks } from './hooks';
import { TOOLCALL_MIME } from './payload';
import { AgentStatusItem } from './statusitem';

const GOTO_PENDING = 'iac-kernel:go-to-permission-request';

/** True for a kernel spec of ours (named iac-kernel, iac-kernel-foo, ...). */
function isAgentKernel(panel: NotebookPanel | null): boolean {
  const name = panel?.sessionContext.session?.kernel?.name ?? panel?.sessionContext.kernelPreference.name;
  return typeof name === 'string' && name.startsWith('iac');
}

/** "/srv/work/main.tf:12" -> path relative to the server root, or null when outside it. */
export function serverPath(location: string, notebookDir: string, serverRoot: string): string | null {
  const path = location.replace(/:\d+(:\d+)?$/, '');
  if (!path.startsWith('/')) {
    return PathExt.normalize(PathExt.join(notebookDir, path));
  }
  const root = serverRoot.replace(/\/+$/, '');
  if (!root || !path.startsWith(`${root}/`)) {
    return null;
  }
  return path.slice(root.length + 1);
}

/** Find the cell showing a tool call's card, by its output data (works with windowed notebooks). */
function cellIndexOfCall(panel: NotebookPanel, callId: string): number {
  const cells = panel.content.widgets;
  for (let index = 0; index < cells.length; index++) {
    const model = cells[index].model;
    if (model.type !== 'code') {
      continue;
    }
    const outputs = (model as any).outputs;
    for (let o = 0; o < (outputs?.length ?? 0); o++) {
      const data = outputs.get(o).data?.[TOOLCALL_MIME] as { callId?: string } | undefined;
      if (data?.callId === callId) {
        return index;
      }
    }
  }
  return -1;
}

async function revealCall(panel: NotebookPanel, callId: string): Promise<boolean> {
  const index = cellIndexOfCall(panel, callId);
  if (index < 0) {
    return false;
  }
  const cell = panel.content.widgets[index];
  panel.content.activeCellIndex = index;
  await panel.content.scrollToCell(cell, 'center');
  const card = panel.content.node.querySelector<HTMLElement>(
    `.iac-toolcard[data-call-id="${CSS.escape(callId)}"]`
  );
  if (card) {
    card.scrollIntoView({ block: 'center' });
    card.classList.remove('iac-toolcard-flash');
    void card.offsetWidth; // restart the animation
    card.classList.add('iac-toolcard-flash');
  }
  return true;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: '@iac-kernel/jupyterlab:activity',
  description: 'Agent session status (model, mode, tokens, pending permissions) for iac-kernel notebooks.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [IStatusBar, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    statusBar: IStatusBar | null,
    palette: ICommandPalette | null
  ) => {
    const activities = new WeakMap<NotebookPanel, SessionActivity>();

    const current = (): { panel: NotebookPanel; activity: SessionActivity } | null => {
      const panel = tracker.currentWidget;
      const activity = panel ? activities.get(panel) : undefined;
      return panel && activity ? { panel, activity } : null;
    };

    const item = new AgentStatusItem(() => {
      if (app.commands.isEnabled(GOTO_PENDING)) {
        void app.commands.execute(GOTO_PENDING);
      }
    });
    const refresh = () => {
      const now = current();
      item.render(now?.activity ?? null, isAgentKernel(now?.panel ?? null));
      app.commands.notifyCommandChanged(GOTO_PENDING);
    };

    tracker.widgetAdded.connect((_, panel) => {
      const activity = new SessionActivity();
      activities.set(panel, activity);
      const unsubscribe = activity.subscribe(() => {
        if (tracker.currentWidget === panel) {
          refresh();
        }
      });
      const context = panel.sessionContext;
      const onIOPub = (_: unknown, msg: unknown) => {
        activity.handle(msg as IIOPubMessageLike);
      };
      const onStatus = (_: unknown, status: string) => {
        if (status === 'restarting' || status === 'starting' || status === 'dead') {
          activity.reset();
        }
      };
      const onKernel = () => {
        activity.reset();
        refresh();
      };
      context.iopubMessage.connect(onIOPub);
      context.statusChanged.connect(onStatus);
      context.kernelChanged.connect(onKernel);
      panel.disposed.connect(() => {
        unsubscribe();
        context.iopubMessage.disconnect(onIOPub);
        context.statusChanged.disconnect(onStatus);
        context.kernelChanged.disconnect(onKernel);
        activities.delete(panel);
        refresh();
      });
    });
    tracker.currentChanged.connect(refresh);

    app.commands.addCommand(GOTO_PENDING, {
      label: 'Go to Agent Permission Request',
      caption: 'Scroll to the tool call in this notebook that waits for Allow / Reject',
      isEnabled: () => (current()?.activity.pending.length ?? 0) > 0,
      execute: async () => {
        const now = current();
        const call = now?.activity.pending[0];
        if (!now || !call) {
          return false;
        }
        return revealCall(now.panel, call.callId);
      }
    });
    palette?.addItem({ command: GOTO_PENDING, category: 'iac-kernel' });

    appHooks.openLocation = location => {
      const panel = tracker.currentWidget;
      const notebookDir = panel ? PathExt.dirname(panel.context.path) : '';
      const path = serverPath(location, notebookDir, PageConfig.getOption('serverRoot'));
      if (path === null) {
        return false;
      }
      void app.commands.execute('docmanager:open', { path });
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
