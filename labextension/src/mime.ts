/**
 * The renderers of the kernel's MIME types (a JupyterLab `mimeExtension`; also loaded by
 * Notebook 7), one row each. Other frontends show the bundle's text/html. The session
 * info rides in display metadata only (status/activity.ts reads it), never as a bundle.
 */

import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { TEXT_DELTA_MIME } from './cards/deltatext';
import { TOOLCALL_MIME } from './cards/payload';
import { TextDeltaRenderer } from './cards/textdelta';
import { ToolCallRenderer } from './cards/toolcard';
import { PLAN_MIME } from './plan/model';
import { PlanRenderer } from './plan/plan';
import { FooterRenderer } from './status/footer';
import { FOOTER_MIME } from './status/footermodel';

type Renderer = new (options: IRenderMime.IRendererOptions) => IRenderMime.IRenderer;

const RENDERERS: [string, string, string, Renderer][] = [
  ['toolcall', TOOLCALL_MIME, 'Renders iac-kernel tool calls as live cards with diffs.', ToolCallRenderer],
  ['plan', PLAN_MIME, 'Renders Terraform / OpenTofu plans from iac-kernel as plan cards.', PlanRenderer],
  ['footer', FOOTER_MIME, "Renders iac-kernel's per-turn footer (model, tokens, time, fold cards).", FooterRenderer],
  ['text-delta', TEXT_DELTA_MIME, "Shows the agent's answer as it is written (text deltas).", TextDeltaRenderer]
];

const extensions: IRenderMime.IExtension[] = RENDERERS.map(([name, mimeType, description, Renderer]) => ({
  id: `@iac-kernel/jupyterlab:${name}`,
  description,
  rendererFactory: {
    // Safe: renderers set text as textContent, and Markdown only after the sanitizer, so
    // untrusted (reopened) notebooks render too.
    safe: true,
    mimeTypes: [mimeType],
    createRenderer: options => new Renderer(options)
  },
  // Below text/html (50): JupyterLab picks the card over the bundle's HTML fallback.
  rank: 20,
  dataType: 'json'
}));

export default extensions;
