// session/load timed from the official TypeScript ACP SDK's client side
// (@agentclientprotocol/sdk, installed under tests/node: `npm ci --prefix tests/node`).
//
// Run by bench/acp_load.py:  node acp_load_node.mjs CONFIG_JSON
// CONFIG_JSON: {"command": [...], "env": {the agent's whole environment}, "cwd": "/abs/workspace",
//               "sessionId": "..."}
//
// Spawns the agent over stdio, initializes, lists sessions (answered once the agent has
// started: timed apart), then times session/load until its answer arrived with every
// replayed update handled by the SDK (parsed, validated against its zod schemas, given
// to the handler, which counts it). Prints one JSON line: {"s", "start s", "client cpu",
// "agent cpu", "updates"}.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";

const sdk = await import(
  new URL("../tests/node/node_modules/@agentclientprotocol/sdk/dist/v1/unstable/acp.js", import.meta.url)
);
const { client, methods, ndJsonStream } = sdk;

const config = JSON.parse(process.argv[2]);

function cpuSeconds(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(")").pop().trim().split(/\s+/);
    return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ: 100 on Linux
  } catch {
    return 0;
  }
}

function ownCpu() {
  const used = process.cpuUsage();
  return (used.user + used.system) / 1e6;
}

const child = spawn(config.command[0], config.command.slice(1), {
  env: config.env, // the agent's whole environment
  stdio: ["pipe", "pipe", "inherit"],
});
let updates = 0;
const app = client({ name: "iac-kernel-bench" })
  .onRequest(methods.client.session.requestPermission, async () => ({
    outcome: { outcome: "cancelled" },
  }))
  .onNotification(methods.client.session.update, async () => {
    updates += 1;
  });

const report = {};
await app.connectWith(
  ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)),
  async (ctx) => {
    await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
    let t = performance.now();
    await ctx.request(methods.agent.session.list, { cwd: config.cwd });
    report["start s"] = (performance.now() - t) / 1000;
    const agent = cpuSeconds(child.pid);
    const cpu = ownCpu();
    t = performance.now();
    await ctx.request(methods.agent.session.load, {
      cwd: config.cwd,
      sessionId: config.sessionId,
      mcpServers: [],
    });
    report.s = (performance.now() - t) / 1000;
    report["client cpu"] = ownCpu() - cpu;
    report["agent cpu"] = cpuSeconds(child.pid) - agent;
    report.updates = updates;
  },
);
child.stdin.end();
child.kill();
process.stdout.write(JSON.stringify(report) + "\n");
process.exit(0);
