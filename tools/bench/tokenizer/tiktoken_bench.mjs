// tiktoken_bench.mjs: OpenAI's tiktoken (npm, Rust compiled to WebAssembly) encoding a text file
// with o200k_base, single-threaded, best of REPS; writes the ids for the agreement check.
//
//   node tiktoken_bench.mjs MODULES_DIR TEXT_FILE REPS IDS_OUT.json   -> JSON on stdout
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [modules, textPath, reps, idsOut] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { get_encoding } = require("tiktoken");

const text = fs.readFileSync(textPath, "utf8");
const encoding = get_encoding("o200k_base");
const seconds = [];
let ids;
for (let r = 0; r < Number(reps); ++r) {
  const start = process.hrtime.bigint();
  ids = encoding.encode_ordinary(text);
  seconds.push(Number(process.hrtime.bigint() - start) / 1e9);
}
fs.writeFileSync(idsOut, JSON.stringify(Array.from(ids)));
encoding.free();
console.log(JSON.stringify({ seconds, tokens: ids.length, bytes: Buffer.byteLength(text, "utf8") }));
