// render_reference.mjs: the reference renderer for Loom's chat template test: @huggingface/jinja
// (npm), the Jinja implementation transformers.js uses.
//
//   node render_reference.mjs MODULES_DIR CASES.json OUT.json
//
// CASES.json: {"template": "...", "contexts": [{...}, ...]}. OUT.json: one entry per context,
// {"text": rendered} or {"error": message}.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [modules, casesPath, outPath] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { Template } = require("@huggingface/jinja");

const { template, contexts } = JSON.parse(fs.readFileSync(casesPath, "utf8"));
const compiled = new Template(template);
const out = contexts.map((context) => {
  try {
    return { text: compiled.render(context) };
  } catch (e) {
    return { error: String(e.message) };
  }
});
fs.writeFileSync(outPath, JSON.stringify(out));
