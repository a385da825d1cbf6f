/**
 * The tool-card payload's types, generated from card.schema.json (package.json
 * `config.cardSchema`) by json-schema-to-typescript: `npm run build:schema` writes this
 * file; never edit it by hand (__tests__/schema.test.ts checks it is current).
 */

/**
 * The payload of application/vnd.iac-kernel.toolcall+json: one tool call as the notebook shows it, sent in display_data and update_display_data bundles (beside text/plain and text/html) and on the status comm. Written by iac_kernel/kernel/render/cards.py (ToolCard.payload), read by the JupyterLab extension (labextension/src/cards/payload.ts); both sides' tests check their payloads against this file. Only the displayed output is cut; the model saw the tool's whole result, and %output CALL shows all of it.
 */
export interface ToolCallPayload {
  /**
   * The payload's version; a reader warns about a newer one.
   */
  version: 1;
  callId: string;
  /**
   * The tool's name, e.g. write_file.
   */
  name: string;
  /**
   * e.g. "write_file: main.tf".
   */
  title: string;
  kind: 'read' | 'edit' | 'search' | 'execute' | 'fetch' | 'other';
  status: 'running' | 'awaiting_permission' | 'done' | 'failed' | 'denied' | 'cancelled';
  /**
   * The call's input as the model sent it, secret values redacted.
   */
  input: {
    [k: string]: unknown;
  };
  /**
   * Live output so far while running, then the result; head + marker + tail when long.
   */
  output: string | null;
  /**
   * The output was cut (outputNote says how).
   */
  outputTruncated: boolean;
  /**
   * e.g. "lines 61–4,919 of 4,939 hidden; the agent saw all of it".
   */
  outputNote: string | null;
  /**
   * Lines in the whole output (0 when there is none yet).
   */
  outputLines: number;
  /**
   * The hidden lines between head and tail, 1-based and inclusive.
   */
  hidden: null | {
    fromLine: number;
    toLine: number;
  };
  /**
   * The shown head of a cut output (null when not cut).
   */
  outputHead: string | null;
  /**
   * The shown tail of a cut output (null when not cut).
   */
  outputTail: string | null;
  /**
   * The output is still streaming (the call runs).
   */
  live: boolean;
  /**
   * Seconds the call ran (so far, while running).
   */
  elapsed: number | null;
  /**
   * Epoch seconds the call started (for a ticking clock).
   */
  startedAt: number | null;
  /**
   * The magic that shows all of the output: "%output <callId>".
   */
  fullOutput: string;
  /**
   * The permission question of this call, if one was asked.
   */
  question: null | QuestionPayload;
  /**
   * The change an edit makes to one file.
   */
  diff: null | {
    path: string;
    /**
     * null for a file the tool creates.
     */
    oldText: string | null;
    newText: string;
  };
  /**
   * Files the call touches.
   */
  locations: string[];
  sessionId: string;
}
export interface QuestionPayload {
  id: string;
  state: 'pending' | 'answered' | 'cancelled';
  /**
   * A per-call question (apply, destroy, writes outside the folder): shown as destructive.
   */
  danger: boolean;
  /**
   * Why the call needs approval, in words for the user.
   */
  reason: string;
  /**
   * Option ids in display order.
   */
  options: string[];
  /**
   * The option chosen, once answered.
   */
  answer: string | null;
  /**
   * The user's words when they rejected the call with a note.
   */
  note: string | null;
  /**
   * Button labels by option id.
   */
  labels: {
    [k: string]: string;
  };
  /**
   * The request's kind: a tool kind, or "question" for the agent's own question (ask_user).
   */
  kind: string;
  /**
   * What the question asks to fill in: a typed confirmation, or the agent's own question.
   */
  form: null | FormPayload;
}
export interface FormPayload {
  title: string;
  /**
   * @minItems 1
   */
  fields: [FieldPayload, ...FieldPayload[]];
}
export interface FieldPayload {
  name: string;
  title: string;
  kind: 'text' | 'choice' | 'boolean' | 'number';
  description: string;
  choices: string[];
  required: boolean;
  default: string | number | boolean | null;
  /**
   * A typed confirmation: the only value that approves.
   */
  mustEqual: string | null;
}
