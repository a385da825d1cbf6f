/**
 * The widgets the app plugin follows: notebook and console panels with a kernel session,
 * and what it keeps for each (its agent activity and the kernel's status channel).
 */

import { ISessionContext } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { SessionActivity } from './activity';
import { KernelChannel } from './channel';

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
