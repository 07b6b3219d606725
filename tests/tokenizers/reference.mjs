// reference.mjs: the JavaScript reference for Loom's tokenizer test. transformers.js's
// tokenizer classes (npm @lenml/tokenizers, the tokenizers part of @huggingface/transformers)
// encode and decode every document of a corpus; the C++ test compares its own ids and text.
//
//   node reference.mjs MODULES_DIR TOKENIZER_DIR CORPUS OUT.jsonl
//
// CORPUS: documents as <uint32 little-endian byte length><bytes>. Bytes are decoded as UTF-8
// the WHATWG way (invalid sequences become U+FFFD), as a browser or Node.js reading a file does.
// OUT.jsonl: one line per document, {"ids": [...], "text": decode(ids), "plain": decode(ids,
// skip_special_tokens)}.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [modules, tokenizerDir, corpusPath, outPath] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { TokenizerLoader } = require("@lenml/tokenizers");

const read = (name) => JSON.parse(fs.readFileSync(path.join(tokenizerDir, name), "utf8"));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: read("tokenizer.json"),
  tokenizerConfig: read("tokenizer_config.json"),
});

const corpus = fs.readFileSync(corpusPath);
const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const out = fs.openSync(outPath, "w");
for (let at = 0; at < corpus.length; ) {
  const length = corpus.readUInt32LE(at);
  const text = decoder.decode(corpus.subarray(at + 4, at + 4 + length));
  at += 4 + length;
  const ids = tokenizer.encode(text);
  const decoded = ids.length ? tokenizer.decode(ids) : "";
  const plain = ids.length ? tokenizer.decode(ids, { skip_special_tokens: true }) : "";
  fs.writeSync(out, JSON.stringify({ ids, text: decoded, plain }) + "\n");
}
fs.closeSync(out);
