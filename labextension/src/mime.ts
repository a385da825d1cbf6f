/**
 * MIME renderers for the iac-kernel payloads (a JupyterLab `mimeExtension`;
 * also loaded by Notebook 7). Other frontends show the bundle's text/html.
 */

import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { foldWatchedOutputs } from './cardoutput';

import { appHooks, sectionState } from './hooks';
import {
  ISessionInfo,
  SESSION_MIME,
  TOOLCALL_MIME,
  formatTokens,
  parseSessionInfo,
  parseToolCall
} from './payload';
import { footerExtension } from './footer';
import { planExtension } from './plan';
import { textDeltaExtension } from './textdelta';
import { renderInvalid, renderToolCard } from './toolcard';

/**
 * Renders a tool call card. JupyterLab calls renderModel again on the same
 * instance for every update_display_data of the card's display_id.
 */
export class ToolCallRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('iac-toolcard-widget');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const raw = model.data[this._mimeType];
    const parsed = parseToolCall(raw);
    if (!parsed.ok) {
      renderInvalid(this.node, parsed.error, raw);
      return;
    }
    renderToolCard(this.node, parsed.value, {
      sections: sectionState(parsed.value.callId),
      openLocation: location => appHooks.openLocation?.(location) ?? false,
      warnings: parsed.warnings,
      answer: appHooks.answer
        ? (id, option, note, values) => appHooks.answer!(this.node, id, option, note, values)
        : undefined,
      fullOutput: appHooks.fullOutput
        ? callId => appHooks.fullOutput!(callId, this.node)
        : undefined
    });
  }

  /** A card that starts folds the outputs earlier cards of the cell kept open. */
  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    const area = this.node.closest('.jp-OutputArea');
    if (area) {
      const earlier = [...area.querySelectorAll<HTMLElement>('.iac-toolcard-widget')].filter(
        card => card.compareDocumentPosition(this.node) & Node.DOCUMENT_POSITION_FOLLOWING
      );
      foldWatchedOutputs(earlier, sectionState);
    }
  }

  private _mimeType: string;
}

/** One line summing up the session after a turn (when the kernel emits it as a bundle). */
export function sessionSummary(info: ISessionInfo): string {
  const parts = [info.sessionId ? `session ${info.sessionId.slice(0, 8)}` : 'no session yet'];
  if (info.model) {
    parts.push(info.model);
  }
  if (info.mode) {
    parts.push(`mode ${info.mode}`);
  }
  if (info.turnUsage) {
    parts.push(`turn ${formatTokens(info.turnUsage.totalTokens)} tokens`);
  }
  if (info.usage) {
    parts.push(`session ${formatTokens(info.usage.totalTokens)} tokens`);
  }
  return parts.join(' · ');
}

export class SessionRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('iac-session-summary');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const parsed = parseSessionInfo(model.data[this._mimeType]);
    this.node.textContent = parsed.ok
      ? sessionSummary(parsed.value)
      : `Unreadable iac-kernel session info: ${parsed.error}`;
    if (parsed.ok) {
      this.node.dataset.sessionId = parsed.value.sessionId;
      this.node.title = parsed.value.cwd ?? '';
    }
  }

  private _mimeType: string;
}

function factory(
  mimeType: string,
  create: (options: IRenderMime.IRendererOptions) => IRenderMime.IRenderer
): IRenderMime.IRendererFactory {
  return {
    // Safe: renderers only ever set textContent, so untrusted (reopened) notebooks render too.
    safe: true,
    mimeTypes: [mimeType],
    createRenderer: create
  };
}

// Rank below text/html (50) so JupyterLab picks the card over the bundle's HTML fallback.
const extensions: IRenderMime.IExtension[] = [
  {
    id: '@iac-kernel/jupyterlab:toolcall',
    description: 'Renders iac-kernel tool calls as live cards with diffs.',
    rendererFactory: factory(TOOLCALL_MIME, options => new ToolCallRenderer(options)),
    rank: 20,
    dataType: 'json'
  },
  {
    id: '@iac-kernel/jupyterlab:session',
    description: "Renders iac-kernel's per-turn session summary.",
    rendererFactory: factory(SESSION_MIME, options => new SessionRenderer(options)),
    rank: 20,
    dataType: 'json'
  },
  planExtension,
  footerExtension,
  textDeltaExtension
];

export default extensions;
