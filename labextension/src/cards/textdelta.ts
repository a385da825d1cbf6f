/**
 * The agent's text as it is written: the kernel sends each streaming update of a text
 * display as a delta (the new text and its offset, in code points) under TEXT_DELTA_MIME,
 * and the final update as the whole Markdown. JupyterLab calls renderModel again on the
 * same renderer for every update_display_data of the display, so the renderer keeps the
 * text received so far and appends each delta. The final update replaces the renderer
 * with JupyterLab's own Markdown renderer (its MIME type differs).
 *
 * The kernel streams deltas only while this extension has its status comm open and says
 * it renders them (channel/comm.ts); other frontends get whole-text updates.
 */

import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { DeltaText, parseDelta } from './deltatext';

const CURSOR = ' ▍';

export class TextDeltaRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(private _options: IRenderMime.IRendererOptions) {
    super();
    this.addClass('iac-text-live');
    this.addClass('jp-RenderedMarkdown');
    this.addClass('jp-RenderedHTMLCommon');
    this.node.setAttribute('aria-busy', 'true');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const delta = parseDelta(model.data[this._options.mimeType]);
    if (!delta) {
      this.node.textContent = 'Unreadable iac-kernel text update.';
      return;
    }
    this._text.apply(delta);
    this._kind = delta.kind;
    // Renders may overlap (markdown parsing is async): only the latest one is shown.
    const serial = ++this._serial;
    const html = await this._html();
    if (serial === this._serial && html !== null) {
      this.node.innerHTML = html;
    }
  }

  /** The text so far as sanitized HTML, or null to keep the plain text already set. */
  private async _html(): Promise<string | null> {
    const prefix = this._text.gap ? '… ' : '';
    if (this._kind === 'thinking') {
      this._thinking(`${prefix}${this._text.text}`);
      return null;
    }
    const parser = this._options.markdownParser;
    if (!parser) {
      this._plain(`${prefix}${this._text.text}${CURSOR}`, 'iac-text-plain');
      return null;
    }
    const html = await parser.render(`${prefix}${this._text.text}${CURSOR}`);
    return this._options.sanitizer.sanitize(html);
  }

  /** Like the kernel's final form: an open aside, its text set as textContent. */
  private _thinking(text: string): void {
    const details = document.createElement('details');
    details.className = 'iac-thinking';
    details.open = true;
    const summary = document.createElement('summary');
    const label = document.createElement('em');
    label.textContent = 'Thinking…';
    summary.appendChild(label);
    const quote = document.createElement('blockquote');
    quote.textContent = text;
    details.append(summary, quote);
    this.node.replaceChildren(details);
  }

  private _plain(text: string, className: string): void {
    const box = document.createElement('div');
    box.className = className;
    box.textContent = text;
    this.node.replaceChildren(box);
  }

  private _text = new DeltaText();
  private _kind: 'text' | 'thinking' = 'text';
  private _serial = 0;
}
