"""sft_reference.py: what the `sft` dataset must produce for each conversation, computed with the
Python originals: transformers renders the chat template (render_jinja_template, what
apply_chat_template calls), Hugging Face's tokenizers tokenizes. Each assistant answer is the
text the template adds between the conversation before it (with add_generation_prompt) and the
conversation through it; its tokens are trained, all others are not.

    python sft_reference.py TOKENIZER_DIR DATA.jsonl OUT.json [last]

With `last`, only the last assistant answer is trained (train_on = "last_assistant").
OUT.json: [{"ids": [...], "trained": [0/1 ...]}, ...], one per line of DATA.jsonl.
"""
import json
import os
import sys

from tokenizers import Tokenizer
from transformers.utils.chat_template_utils import render_jinja_template


def main():
    tokenizer_dir, data_path, out_path = sys.argv[1:4]
    last_only = sys.argv[4:] == ["last"]
    tokenizer = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    special = {name: config.get(name) if isinstance(config.get(name), str) else "" for name in ("bos_token", "eos_token")}

    def render(messages, add_generation_prompt):
        rendered, _ = render_jinja_template(conversations=[messages], chat_template=config["chat_template"],
                                            add_generation_prompt=add_generation_prompt, **special)
        return rendered[0]

    out = []
    with open(data_path, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    for line in lines:
        messages = json.loads(line)["messages"]
        roles = [m["role"] for m in messages]
        last_assistant = len(roles) - 1 - roles[::-1].index("assistant") if "assistant" in roles else -1
        pieces, sofar = [], ""
        for k, message in enumerate(messages):
            if message["role"] != "assistant" or (last_only and k != last_assistant):
                continue
            prompt = render(messages[:k], True)
            through = render(messages[:k + 1], False)
            pieces += [(prompt[len(sofar):], 0), (through[len(prompt):], 1)]
            sofar = through
        pieces.append((render(messages, False)[len(sofar):], 0))
        ids, trained = [], []
        for text, flag in pieces:
            if text:
                piece = tokenizer.encode(text, add_special_tokens=False).ids
                ids += piece
                trained += [flag] * len(piece)
        out.append({"ids": ids, "trained": trained})
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
