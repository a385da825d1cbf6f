// The TypeScript ACP SDK (@agentclientprotocol/sdk) as a client of `iac-kernel acp`.
//
// Run by tests/test_acp_node.py:  node acp_client.mjs CONFIG_JSON
// CONFIG_JSON: {"command": [...], "env": {...}, "cwd": "/abs/workspace",
//               "fsServer": {ACP stdio mcpServers entry}, "mcpScript": "/abs/acp_mcp.json"}
//
// Every message the agent sends is validated against the SDK's own zod schemas (v1 with
// the unstable additions the agent uses: fork, resume, close, usage): updates
// and permission requests by method, answers by the method of the request they answer.
// Validation must be lossless: an item or field the schemas' lenient parsers would drop
// or replace (vecSkipError, defaultOnError) is a failure too. Also checked for every
// session: no session/update after a session/prompt answer until the next prompt, and
// none after a session/load answer. Prints a JSON report; exit code 1 on any failure.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk/unstable";

const zod = await import(
  new URL("./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js", import.meta.url)
);

const config = JSON.parse(process.argv[2]);
const failures = [];
const counts = {};
const sentMethods = new Map(); // request id -> method (requests we sent)
// Sessions that must stay quiet: their prompt or load was answered and no request about
// them was sent since. Value: what was answered.
const quiet = new Map();
const sessionOf = new Map(); // request id -> session id (prompt and load requests)

const RESULT_SCHEMAS = {
  initialize: zod.zInitializeResponse,
  "session/new": zod.zNewSessionResponse,
  "session/load": zod.zLoadSessionResponse,
  "session/resume": zod.zResumeSessionResponse,
  "session/list": zod.zListSessionsResponse,
  "session/prompt": zod.zPromptResponse,
  "session/set_mode": zod.zSetSessionModeResponse,
  "session/set_config_option": zod.zSetSessionConfigOptionResponse,
  "session/close": zod.zCloseSessionResponse,
  "session/delete": zod.zDeleteSessionResponse,
};
// Fields our answers carry beyond schema v1.19 (documented in docs/protocol.md).
const EXTENSIONS = new Set(["models"]);

function fail(what, detail) {
  failures.push({ what, detail: String(detail).slice(0, 600) });
}

function count(kind) {
  counts[kind] = (counts[kind] || 0) + 1;
}

// Parsed must keep every array item and every non-null field of the original.
function lossless(original, parsed, path) {
  if (Array.isArray(original)) {
    if (!Array.isArray(parsed) || parsed.length !== original.length) {
      return `${path}: ${original.length} items sent, ${parsed?.length} kept by the schema`;
    }
    for (let i = 0; i < original.length; i++) {
      const problem = lossless(original[i], parsed[i], `${path}[${i}]`);
      if (problem) return problem;
    }
    return null;
  }
  if (original && typeof original === "object") {
    if (!parsed || typeof parsed !== "object") return `${path}: object replaced by ${parsed}`;
    for (const [key, value] of Object.entries(original)) {
      if (value === null || value === undefined) continue;
      if (!(key in parsed)) {
        if (path === "$" && EXTENSIONS.has(key)) continue;
        if (key === "_meta") continue;
        return `${path}.${key}: dropped by the schema`;
      }
      const problem = lossless(value, parsed[key], `${path}.${key}`);
      if (problem) return problem;
    }
    return null;
  }
  return null;
}

function check(schema, value, what) {
  const result = schema.safeParse(value);
  if (!result.success) {
    fail(what, JSON.stringify(result.error.issues));
    return;
  }
  const problem = lossless(value, result.data, "$");
  if (problem) fail(what, problem);
}

function inspectIncoming(message) {
  if (message.method === "session/update") {
    count(`update:${message.params?.update?.sessionUpdate}`);
    check(zod.zSessionNotification, message.params, "session/update");
    const sid = message.params?.sessionId;
    if (quiet.has(sid)) fail(`update after a ${quiet.get(sid)} answer`, JSON.stringify(message));
  } else if (message.method === "session/request_permission") {
    count("request:session/request_permission");
    check(zod.zRequestPermissionRequest, message.params, "session/request_permission");
  } else if (message.method) {
    fail("unexpected method from the agent", message.method);
  } else if ("id" in message) {
    const method = sentMethods.get(message.id);
    if ("error" in message) {
      count(`error:${method}`);
      const { code, message: text } = message.error || {};
      if (!Number.isInteger(code) || typeof text !== "string") fail("bad error", JSON.stringify(message));
    } else {
      count(`result:${method}`);
      const schema = RESULT_SCHEMAS[method];
      if (schema) check(schema, message.result, `${method} result`);
      else fail("answer to an unknown request", JSON.stringify(message));
    }
    const sid = sessionOf.get(message.id);
    if (sid !== undefined && "result" in message) quiet.set(sid, method);
  }
}

function inspectOutgoing(message) {
  if (message.method && "id" in message) {
    sentMethods.set(message.id, message.method);
    const sid = message.params?.sessionId;
    if (sid === undefined) return;
    quiet.delete(sid);
    if (message.method === "session/prompt" || message.method === "session/load") {
      sessionOf.set(message.id, sid);
    }
  }
}

function lineTap(onLine) {
  let buffer = "";
  const decoder = new TextDecoder();
  return new TransformStream({
    transform(chunk, controller) {
      buffer += decoder.decode(chunk, { stream: true });
      let index;
      while ((index = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, index).trim();
        buffer = buffer.slice(index + 1);
        if (line) {
          try {
            onLine(JSON.parse(line));
          } catch (error) {
            fail("not JSON", `${line.slice(0, 200)} (${error})`);
          }
        }
      }
      controller.enqueue(chunk);
    },
  });
}

const child = spawn(config.command[0], config.command.slice(1), {
  env: config.env,
  stdio: ["pipe", "pipe", "inherit"],
});
const toAgent = new TransformStream();
toAgent.readable
  .pipeThrough(lineTap(inspectOutgoing))
  .pipeTo(Writable.toWeb(child.stdin))
  .catch(() => {});
const fromAgent = Readable.toWeb(child.stdout).pipeThrough(
  lineTap(inspectIncoming),
);

const permissionAnswers = [];
// Schema 1.25 fields the agent sends raw: every chunk's messageId, every tool call's name.
const chunksWithoutMessageId = [];
const messageIds = new Set();
const toolCallNames = [];
const plans = []; // each plan update's entry statuses
const mcpResults = []; // texts of completed tool calls
const app = client({ name: "iac-kernel-node-test" })
  .onRequest(methods.client.session.requestPermission, async ({ params }) => {
    permissionAnswers.push(params.toolCall.title);
    return { outcome: { outcome: "selected", optionId: "allow_once" } };
  })
  .onNotification(methods.client.session.update, async ({ params }) => {
    const update = params.update;
    if (update.sessionUpdate?.endsWith("_chunk")) {
      if (update.messageId) messageIds.add(update.messageId);
      else chunksWithoutMessageId.push(update.sessionUpdate);
    }
    if (update.sessionUpdate === "tool_call") toolCallNames.push(update.name ?? null);
    if (update.sessionUpdate === "plan") plans.push(update.entries.map((e) => e.status).join(","));
    if (update.sessionUpdate === "tool_call" && update.title?.startsWith("fs: ")) {
      if (update.kind !== "other") fail("MCP tool kind", JSON.stringify(update));
    }
    if (update.sessionUpdate === "tool_call_update" && update.status === "completed") {
      for (const item of update.content || []) {
        if (item.type === "content" && item.content?.type === "text") mcpResults.push(item.content.text);
      }
    }
  });

const CAPABILITIES = { session: { configOptions: { boolean: {} }, notices: {}, compaction: {} } };
const booleanOptions = []; // ids of the boolean config options offered
let booleanSet = null; // currentValue of sandbox_network after setting it to false
const steps = [];
try {
  await app.connectWith(ndJsonStream(toAgent.writable, fromAgent), async (ctx) => {
    const request = async (method, params) => {
      steps.push(method);
      return ctx.request(method, params);
    };
    const cwd = config.cwd;
    // A schema 1.25 client: boolean config options, notices, compaction updates.
    await request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: CAPABILITIES });
    const made = await request(methods.agent.session.new, { cwd, mcpServers: [] });
    const sid = made.sessionId;
    for (const option of made.configOptions || []) {
      if (option.type === "boolean") booleanOptions.push(option.id);
    }
    const first = await request(methods.agent.session.prompt, {
      sessionId: sid,
      prompt: [{ type: "text", text: "hello" }],
    });
    if (first.stopReason !== "end_turn") fail("prompt", JSON.stringify(first));
    const wrote = await request(methods.agent.session.prompt, {
      sessionId: sid,
      prompt: [{ type: "text", text: "write the file" }],
    });
    if (wrote.stopReason !== "end_turn" || permissionAnswers.length !== 1) {
      fail("permission turn", JSON.stringify({ wrote, permissionAnswers }));
    }
    await request(methods.agent.session.prompt, {
      sessionId: sid,
      prompt: [{ type: "text", text: "/session" }],
    });
    // The model's update_plan checklist comes as a plan update (and again on load).
    await request(methods.agent.session.prompt, {
      sessionId: sid,
      prompt: [{ type: "text", text: "plan the work" }],
    });
    // A cancelled turn: its answer comes after all its updates, usage included.
    const slow = request(methods.agent.session.prompt, {
      sessionId: sid,
      prompt: [{ type: "text", text: "stream slowly" }],
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await ctx.notify(methods.agent.session.cancel, { sessionId: sid });
    const cancelled = await slow;
    if (cancelled.stopReason !== "cancelled" || !(cancelled.usage?.totalTokens > 0)) {
      fail("cancelled turn", JSON.stringify(cancelled));
    }
    await request(methods.agent.session.setMode, { sessionId: sid, modeId: "accept_edits" });
    await request(methods.agent.session.setConfigOption, {
      sessionId: sid,
      configId: "max_tokens",
      value: "4096",
    });
    const toggled = await request(methods.agent.session.setConfigOption, {
      sessionId: sid,
      configId: "sandbox_network",
      type: "boolean",
      value: false,
    });
    booleanSet = toggled.configOptions.find((o) => o.id === "sandbox_network")?.currentValue;
    await request(methods.agent.session.list, { cwd });
    await request(methods.agent.session.close, { sessionId: sid });
    await request(methods.agent.session.load, { sessionId: sid, cwd, mcpServers: [] });
    await request(methods.agent.session.resume, { sessionId: sid, cwd });
    await request(methods.agent.session.close, { sessionId: sid });
    await request(methods.agent.session.delete, { sessionId: sid });
    const listed = await request(methods.agent.session.list, { cwd });
    if (listed.sessions.some((s) => s.sessionId === sid)) fail("delete", "still listed");
    try {
      await request(methods.agent.session.load, { sessionId: sid, cwd, mcpServers: [] });
      fail("load of a deleted session", "answered");
    } catch (error) {
      if (error.code !== -32602) fail("load of a deleted session", JSON.stringify(error));
    }

    // An MCP server (the npm filesystem server) in a session; its tool is asked as kind
    // "other" and its result comes back. The model is switched with a slash command.
    const withMcp = await request(methods.agent.session.new, {
      cwd,
      mcpServers: [config.fsServer],
    });
    const servers = withMcp._meta?.iac_kernel?.mcpServers || [];
    if (servers.length !== 1 || servers[0].status !== "running") {
      fail("MCP server status", JSON.stringify(servers));
    }
    const mcpSid = withMcp.sessionId;
    await request(methods.agent.session.prompt, {
      sessionId: mcpSid,
      prompt: [{ type: "text", text: `/model scripted:${config.mcpScript}` }],
    });
    const asked = permissionAnswers.length;
    const fsTurn = await request(methods.agent.session.prompt, {
      sessionId: mcpSid,
      prompt: [{ type: "text", text: `fs list in ${cwd}` }],
    });
    if (fsTurn.stopReason !== "end_turn" || permissionAnswers.length !== asked + 1) {
      fail("MCP tool turn", JSON.stringify({ fsTurn, permissionAnswers }));
    }
    if (!mcpResults.some((text) => text.includes("out.txt"))) {
      fail("MCP tool result", JSON.stringify(mcpResults));
    }
    await request(methods.agent.session.close, { sessionId: mcpSid });
  });
} catch (error) {
  fail("client run", error?.stack || error);
} finally {
  child.stdin.end();
}
await new Promise((resolve) => {
  if (child.exitCode !== null) resolve();
  child.on("exit", resolve);
  setTimeout(() => {
    child.kill();
    resolve();
  }, 10000);
});
const schema125 = {
  chunksWithoutMessageId,
  messageIds: messageIds.size,
  toolCallNames,
  booleanOptions,
  booleanSet,
  plans,
};
process.stdout.write(JSON.stringify({ steps, counts, failures, schema125 }) + "\n");
process.exit(failures.length ? 1 : 0);
