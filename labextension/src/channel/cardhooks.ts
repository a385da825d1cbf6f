/**
 * The app hooks the cards call (see `cards/hooks.ts`): their full outputs, answers and plan
 * rows come from the kernel of the notebook or console holding the card, and a file
 * location on a card opens in the app.
 */

import { JupyterFrontEnd } from '@jupyterlab/application';
import { PageConfig, PathExt } from '@jupyterlab/coreutils';

import { appHooks } from '../cards/hooks';
import { ITracked } from './widgets';

const NO_KERNEL = 'this card is not in a notebook with a running kernel';

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

/**
 * Set the hooks: `entryOf(node)` is the followed widget holding a card's node, and
 * `current()` the one in front (whose notebook's folder relative paths start from).
 */
export function setCardHooks(
  app: JupyterFrontEnd,
  entryOf: (node: HTMLElement) => ITracked | null,
  current: () => ITracked | null
): void {
  appHooks.fullOutput = (callId, node) => {
    const entry = entryOf(node);
    if (!entry) {
      return Promise.reject(new Error(NO_KERNEL));
    }
    return entry.channel.fullOutput(callId);
  };

  appHooks.answer = async (node, questionId, option, note, values) => {
    const entry = entryOf(node);
    if (!entry || !entry.channel.open) {
      throw new Error(NO_KERNEL);
    }
    await entry.channel.answer(questionId, option, note, values);
    entry.channel.refresh();
  };

  appHooks.planRow = (key, address, node) => {
    const entry = entryOf(node);
    if (!entry) {
      return Promise.reject(new Error(NO_KERNEL));
    }
    return entry.channel.planRow(key, address);
  };

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
}
