/**
 * The approvals plugin: the "Approvals" sidebar panel (panel.ts), a command that opens
 * it or one record, and a page address that opens a record at once (the webhook's link:
 * `/lab?iac-approval=ID`, on JupyterHub through `/hub/user-redirect/lab?...`).
 */

import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { LabIcon } from '@jupyterlab/ui-components';

import { ApprovalsApi } from './api';
import { recordInUrl } from './model';
import { ApprovalView, ApprovalsPanel } from './panel';

export const OPEN_APPROVALS = 'iac-kernel:open-approvals';
export const PANEL_ID = 'iac-kernel-approvals';

/** A shield with a check mark (Material Design's "verified user", Apache 2.0). */
const approvalsIcon = new LabIcon({
  name: 'iac-kernel:approvals',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
    '<path class="jp-icon3" fill="#616161" d="M12 1 3 5v6c0 5.55 3.84 10.74 9 12 5.16-1.26 ' +
    '9-6.45 9-12V5l-9-4zm-2 16-4-4 1.41-1.41L10 14.17l6.59-6.59L18 9l-8 8z"/></svg>'
});

export const approvalsPlugin: JupyterFrontEndPlugin<void> = {
  id: '@iac-kernel/jupyterlab:approvals',
  description:
    "The team's pending iac-kernel approvals: each opens on the plan card its requester saw, with Approve / Reject.",
  autoStart: true,
  optional: [ICommandPalette, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null
  ) => {
    const api = new ApprovalsApi(app.serviceManager.serverSettings);
    const views = new Map<string, ApprovalView>();
    const open = (id: string) => {
      let view = views.get(id);
      if (!view || view.isDisposed) {
        view = new ApprovalView(api, id);
        views.set(id, view);
        const made = view;
        made.disposed.connect(() => views.get(id) === made && views.delete(id));
        app.shell.add(view, 'main');
      }
      app.shell.activateById(view.id);
    };
    const panel = new ApprovalsPanel(api, open);
    panel.id = PANEL_ID;
    panel.title.icon = approvalsIcon;
    panel.title.caption = 'Approvals';
    app.shell.add(panel, 'left', { rank: 650 });
    restorer?.add(panel, PANEL_ID);

    app.commands.addCommand(OPEN_APPROVALS, {
      label: args => (typeof args.id === 'string' ? `Open approval ${args.id}` : 'Approvals'),
      caption: "The team's pending approvals",
      execute: args => {
        app.shell.activateById(PANEL_ID);
        if (typeof args.id === 'string' && args.id) {
          open(args.id);
        }
      }
    });
    palette?.addItem({ command: OPEN_APPROVALS, category: 'iac-kernel' });

    const linked = recordInUrl(window.location.href);
    if (linked) {
      void app.restored.then(() => app.commands.execute(OPEN_APPROVALS, { id: linked }));
    }
  }
};
