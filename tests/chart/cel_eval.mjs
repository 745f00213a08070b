// Evaluates CEL expressions the way the API server evaluates a webhook's matchConditions:
// variables `object`, `oldObject` (null when absent) and `request`, with the npm package
// @bufbuild/cel (a CEL evaluator conforming to the CEL spec's test suite).
//
//   node tests/chart/cel_eval.mjs MODELS_DIR < cases.json
//
// stdin: a JSON array of {expression, object, oldObject, request} (and, for a
// ValidatingAdmissionPolicy, namespaceObject and variables). stdout: a JSON array,
// per case true/false, or {"error": "..."} when the expression does not evaluate to a bool
// (the API server then applies the webhook's failurePolicy).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.argv[2];
const cel = await import(pathToFileURL(path.join(dir, "node_modules", "@bufbuild", "cel", "dist", "esm", "index.js")).href);

// JSON -> CEL input: objects become maps, integers ints (bigint), as in the API server.
function toCel(v) {
  if (Array.isArray(v)) return v.map(toCel);
  if (v !== null && typeof v === "object") {
    const m = new Map();
    for (const [k, x] of Object.entries(v)) m.set(k, toCel(x));
    return m;
  }
  if (typeof v === "number" && Number.isInteger(v)) return BigInt(v);
  return v;
}

const out = [];
for (const c of JSON.parse(fs.readFileSync(0, "utf8"))) {
  try {
    const vars = {
      object: toCel(c.object ?? null), oldObject: toCel(c.oldObject ?? null), request: toCel(c.request),
    };
    // a ValidatingAdmissionPolicy's expressions also see namespaceObject and variables
    if ("namespaceObject" in c) vars.namespaceObject = toCel(c.namespaceObject);
    if ("variables" in c) vars.variables = toCel(c.variables);
    const r = cel.run(c.expression, vars);
    out.push(typeof r === "boolean" ? r : { error: String(r && r.message ? r.message : r) });
  } catch (e) {
    out.push({ error: String(e && e.message ? e.message : e) });
  }
}
process.stdout.write(JSON.stringify(out));
