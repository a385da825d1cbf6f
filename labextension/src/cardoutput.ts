/**
 * A card's output: live output while a command runs (with a ticking clock), head and tail
 * of a long output with an honest note, and the "Show full output" button.
 */

import { ICardOptions, ISectionState, el, section } from './cardbase';
import { copyButton } from './copy';
import { IToolCall, countLines, formatCount, formatElapsed, hiddenNote } from './payload';

/** Output shown open by default up to this many lines. */
const SHORT_OUTPUT_LINES = 12;

/** Ticking clocks of running cards, so a re-render or a detached card stops its timer. */
const clocks = new WeakMap<HTMLElement, number>();

export function stopClock(host: HTMLElement): void {
  const timer = clocks.get(host);
  if (timer !== undefined) {
    clearInterval(timer);
    clocks.delete(host);
  }
}

/** Count up from the kernel's elapsed time, on the browser's clock (no clock skew). */
export function startClock(host: HTMLElement, call: IToolCall): void {
  const clock = host.querySelector<HTMLElement>('.iac-toolcard-elapsed');
  if (!clock || call.elapsed === null || call.status !== 'running') {
    return;
  }
  const base = call.elapsed;
  const since = Date.now();
  clocks.set(
    host,
    window.setInterval(() => {
      if (!host.isConnected && clocks.has(host)) {
        stopClock(host);
        return;
      }
      clock.textContent = formatElapsed(base + (Date.now() - since) / 1000);
    }, 1000)
  );
}

/**
 * A new card started below: outputs left open only because the reader watched them live
 * fold now (an output the reader opened or closed keeps the reader's choice).
 */
export function foldWatchedOutputs(
  cards: Iterable<HTMLElement>,
  state: (callId: string) => ISectionState
): void {
  for (const card of cards) {
    const callId = card.dataset.callId;
    const sections = callId ? state(callId) : undefined;
    if (!sections?.shownLive || sections.output !== undefined || card.dataset.status === 'running') {
      continue;
    }
    sections.shownLive = false;
    const details = card.querySelector<HTMLDetailsElement>('details[data-section="output"]');
    if (details) {
      details.open = false;
    }
  }
}

function fullOutputNote(text: string): string {
  const lines = countLines(text);
  return `Full output: ${formatCount(lines)} line${lines === 1 ? '' : 's'}, as the agent saw it.`;
}

export function outputSection(call: IToolCall, options: ICardOptions): HTMLElement | null {
  if (call.output === null) {
    return null;
  }
  const full = options.sections.fullText;
  const cut = call.outputTruncated && full === undefined;
  // The kernel counts the whole output; without its count, count what we have.
  const lines = full !== undefined ? countLines(full) : call.outputLines ?? countLines(call.output);
  const running = call.status === 'running';
  if (running) {
    // What the reader watched stays open after the command ends (until they fold it).
    options.sections.shownLive = true;
  }
  const label = running ? 'Output so far' : 'Output';
  const summary = `${label} (${formatCount(lines)} line${lines === 1 ? '' : 's'}${cut ? ', part hidden' : ''})`;
  const { details, body } = section(
    'output',
    summary,
    call.status === 'failed' ||
      call.status === 'denied' ||
      running ||
      options.sections.shownLive === true ||
      lines <= SHORT_OUTPUT_LINES,
    options
  );
  body.classList.add('iac-copyable');
  body.appendChild(
    copyButton(() => options.sections.fullText ?? call.output ?? '', 'the output (as shown)')
  );
  const errorClass = call.status === 'failed' ? ' iac-toolcard-error' : '';
  const pre = (text: string) => el('pre', `iac-toolcard-pre iac-toolcard-output-text${errorClass}`, text);
  if (full !== undefined) {
    body.appendChild(pre(full));
    body.appendChild(el('div', 'iac-toolcard-note iac-toolcard-full-note', fullOutputNote(full)));
    return details;
  }
  const note = hiddenNote(call);
  if (cut && call.outputHead !== null && call.outputTail !== null) {
    // One scroll box for head, marker and tail (not one per part).
    const scroll = el('div', 'iac-toolcard-scroll');
    scroll.appendChild(pre(call.outputHead));
    scroll.appendChild(el('div', 'iac-toolcard-hidden-marker', `⋯ ${note ?? 'part hidden'} ⋯`));
    scroll.appendChild(pre(call.outputTail));
    body.appendChild(scroll);
  } else {
    body.appendChild(pre(call.output));
  }
  if (cut) {
    const footer = el('div', 'iac-toolcard-output-footer');
    footer.appendChild(el('span', 'iac-toolcard-note iac-toolcard-hidden-note', `${note}.`));
    if (options.fullOutput && !running) {
      footer.appendChild(fullOutputButton(call, options, body));
    }
    body.appendChild(footer);
  }
  return details;
}

function fullOutputButton(call: IToolCall, options: ICardOptions, body: HTMLElement): HTMLElement {
  const button = el('button', 'iac-toolcard-full-button', 'Show full output');
  button.type = 'button';
  button.title = 'Fetch the whole output of this call from the kernel';
  button.addEventListener('click', () => {
    button.disabled = true;
    button.textContent = 'Loading…';
    options.fullOutput!(call.callId).then(
      text => {
        options.sections.fullText = text;
        options.sections.output = true;
        const errorClass = call.status === 'failed' ? ' iac-toolcard-error' : '';
        body.replaceChildren(
          copyButton(() => text, 'the whole output'),
          el('pre', `iac-toolcard-pre iac-toolcard-output-text${errorClass}`, text),
          el('div', 'iac-toolcard-note iac-toolcard-full-note', fullOutputNote(text))
        );
        const summary = body.parentElement?.querySelector('summary');
        if (summary) {
          const lines = countLines(text);
          summary.textContent = `Output (${formatCount(lines)} line${lines === 1 ? '' : 's'})`;
        }
      },
      (error: unknown) => {
        button.disabled = false;
        button.textContent = 'Show full output';
        const message = error instanceof Error ? error.message : String(error);
        body.appendChild(el('div', 'iac-toolcard-warning', `Could not fetch the full output: ${message}`));
      }
    );
  });
  return button;
}

