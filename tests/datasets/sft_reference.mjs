// sft_reference.mjs: what the `sft` dataset must produce for each conversation, computed with
// the reference implementations: @huggingface/jinja renders the chat template, transformers.js
// (@lenml/tokenizers) tokenizes. Each assistant answer is the text the template adds between
// the conversation before it (with add_generation_prompt) and the conversation through it;
// its tokens are trained, all others are not.
//
//   node sft_reference.mjs MODULES_DIR TOKENIZER_DIR DATA.jsonl OUT.json [last]
// With `last`, only the last assistant answer is trained (train_on = "last_assistant").
// OUT.json: [{"ids": [...], "trained": [0/1 ...]}, ...], one per line of DATA.jsonl.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [modules, tokenizerDir, dataPath, outPath, mode] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { TokenizerLoader } = require("@lenml/tokenizers");
const { Template } = require("@huggingface/jinja");

const read = (name) => JSON.parse(fs.readFileSync(path.join(tokenizerDir, name), "utf8"));
const config = read("tokenizer_config.json");
const tokenizer = TokenizerLoader.fromPreTrained({ tokenizerJSON: read("tokenizer.json"), tokenizerConfig: config });
const template = new Template(config.chat_template);
const render = (messages, add_generation_prompt) =>
  template.render({ messages, add_generation_prompt, bos_token: config.bos_token ?? "", eos_token: config.eos_token ?? "" });

const out = [];
for (const line of fs.readFileSync(dataPath, "utf8").split("\n")) {
  if (!line.trim()) continue;
  const { messages } = JSON.parse(line);
  const pieces = [];
  let sofar = "";
  const lastAssistant = messages.map((m) => m.role).lastIndexOf("assistant");
  messages.forEach((m, k) => {
    if (m.role !== "assistant" || (mode === "last" && k !== lastAssistant)) return;
    const prompt = render(messages.slice(0, k), true);
    const through = render(messages.slice(0, k + 1), false);
    pieces.push([prompt.slice(sofar.length), 0], [through.slice(prompt.length), 1]);
    sofar = through;
  });
  pieces.push([render(messages, false).slice(sofar.length), 0]);
  const ids = [], trained = [];
  for (const [text, flag] of pieces) {
    if (!text) continue;
    const piece = tokenizer.encode(text, { add_special_tokens: false });
    ids.push(...piece);
    trained.push(...piece.map(() => flag));
  }
  out.push({ ids, trained });
}
fs.writeFileSync(outPath, JSON.stringify(out));
