// Validate JSON values against the TypeScript ACP SDK's zod schemas (v1 unstable: the
// schema 1.25 additions), losslessly: an item or field the schemas' lenient parsers would
// drop or replace is a failure too (as in acp_client.mjs).
//
// Run by tests/node_schema.py:  node validate.mjs < ITEMS_JSON
// ITEMS_JSON: [{"schema": "zSessionNotification", "value": {...}}, ...]
// Prints {"failures": [{"index": i, "problem": "..."}]} as one JSON line.
// Top-level fields beyond the schema that our answers carry (docs/protocol.md):
const EXTENSIONS = new Set(["models"]);

import { readFileSync } from "node:fs";

const zod = await import(
  new URL("./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js", import.meta.url)
);

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
      if (value === null || value === undefined || key === "_meta") continue;
      if (!(key in parsed)) {
        if (path === "$" && EXTENSIONS.has(key)) continue;
        return `${path}.${key}: dropped by the schema`;
      }
      const problem = lossless(value, parsed[key], `${path}.${key}`);
      if (problem) return problem;
    }
    return null;
  }
  if (original !== parsed) return `${path}: ${JSON.stringify(original)} became ${JSON.stringify(parsed)}`;
  return null;
}

const items = JSON.parse(readFileSync(0, "utf8"));
const failures = [];
items.forEach((item, index) => {
  const schema = zod[item.schema];
  if (!schema) {
    failures.push({ index, problem: `no schema ${item.schema}` });
    return;
  }
  const result = schema.safeParse(item.value);
  if (!result.success) {
    failures.push({ index, problem: JSON.stringify(result.error.issues).slice(0, 800) });
    return;
  }
  const problem = lossless(item.value, result.data, "$");
  if (problem) failures.push({ index, problem });
});
process.stdout.write(JSON.stringify({ failures }) + "\n");
