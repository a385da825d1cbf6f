/**
 * The footer under a turn's output (kernel/render/footer.py): model, tokens in/out with the
 * cached share, elapsed time; a button folds the turn's cards (tool and plan cards of the
 * same cell) and unfolds them again.
 */

import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { el } from '../dom';
import { ITurnFooter, footerLine, parseFooter } from './footermodel';

/** The output area holding this footer: the turn's cell output. */
function outputArea(node: HTMLElement): HTMLElement | null {
  return node.closest<HTMLElement>('.jp-OutputArea');
}

const FOLDED = 'iac-turn-folded';

function cardCount(area: HTMLElement | null): number {
  return area ? area.querySelectorAll('.iac-toolcard-widget, .iac-plan-widget').length : 0;
}

/** line: the kernel's own text/plain of the footer, when it sent one. */
export function renderFooter(node: HTMLElement, footer: ITurnFooter, line?: string): void {
  node.replaceChildren();
  node.classList.add('iac-turn-footer');
  node.appendChild(el('span', 'iac-turn-footer-line', line ?? footerLine(footer)));
  const fold = el('button', 'iac-turn-fold', 'Fold cards');
  fold.type = 'button';
  fold.title = "Fold this turn's tool and plan cards (the text stays)";
  fold.setAttribute('aria-pressed', 'false');
  fold.addEventListener('click', () => {
    const area = outputArea(node);
    if (!area) {
      return;
    }
    const folded = area.classList.toggle(FOLDED);
    fold.textContent = folded ? `Show cards (${cardCount(area)})` : 'Fold cards';
    fold.setAttribute('aria-pressed', folded ? 'true' : 'false');
  });
  node.appendChild(fold);
}

export class FooterRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(private _options: IRenderMime.IRendererOptions) {
    super();
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const footer = parseFooter(model.data[this._options.mimeType]);
    if (footer === null) {
      this.node.textContent = 'Unreadable iac-kernel turn footer.';
      return;
    }
    const plain = model.data['text/plain'];
    renderFooter(this.node, footer, typeof plain === 'string' ? plain : undefined);
  }

  /** A re-run cell starts unfolded (the class sits on the output area, which is reused). */
  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    outputArea(this.node)?.classList.remove(FOLDED);
  }
}
