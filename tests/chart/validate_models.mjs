// Validates Kubernetes objects against the real API schemas, using the npm package
// kubernetes-models (one class per kind; validate() throws on a schema violation) and its
// cert-manager and prometheus-operator siblings for the chart's optional objects.
//
//   node tests/chart/validate_models.mjs MODELS_DIR < objects.json
//
// MODELS_DIR holds node_modules/ (scripts/kube-models.sh prints it). stdin: a JSON array
// of objects. stdout: a JSON array with one entry per object, null when it is valid, else
// a message naming the kind, the name and what is wrong. An object whose kind no package
// models is an error too: nothing may pass unchecked.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: validate_models.mjs MODELS_DIR < objects.json");
  process.exit(2);
}
const nm = path.join(dir, "node_modules");

function moduleFile(apiVersion, kind) {
  const slash = apiVersion.indexOf("/");
  const group = slash < 0 ? "" : apiVersion.slice(0, slash);
  let pkg = "kubernetes-models";
  if (group === "monitoring.coreos.com") pkg = "@kubernetes-models/prometheus-operator";
  else if (group.endsWith("cert-manager.io")) pkg = "@kubernetes-models/cert-manager";
  // core objects live in kubernetes-models/v1/<Kind>.js, others in <group>/<version>/<Kind>.js
  return path.join(nm, pkg, apiVersion, kind + ".js");
}

const objects = JSON.parse(fs.readFileSync(0, "utf8"));
const out = [];
for (const obj of objects) {
  const what = `${obj && obj.kind}/${obj && obj.metadata && obj.metadata.name}`;
  if (!obj || typeof obj.apiVersion !== "string" || typeof obj.kind !== "string") {
    out.push(`${what}: no apiVersion or kind`);
    continue;
  }
  const file = moduleFile(obj.apiVersion, obj.kind);
  if (!fs.existsSync(file)) {
    out.push(`${what}: no schema for ${obj.apiVersion} ${obj.kind} (looked for ${file})`);
    continue;
  }
  const mod = await import(pathToFileURL(file).href);
  const Cls = mod[obj.kind];
  try {
    new Cls(obj).validate();
    out.push(null);
  } catch (e) {
    out.push(`${what} (${obj.apiVersion}): ${e && e.message ? e.message : String(e)}`);
  }
}
process.stdout.write(JSON.stringify(out));
