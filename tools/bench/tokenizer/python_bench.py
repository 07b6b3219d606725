"""python_bench.py: the Python tokenizers Loom is compared with, encoding a text file with GPT-4o's
o200k vocabulary, single-threaded, best of REPS: OpenAI's tiktoken (Rust, the same library
`tiktoken.get_encoding("o200k_base")` gives) and Hugging Face's tokenizers on the same
tokenizer.json Loom reads. Writes each one's ids for the agreement check.

    python python_bench.py GPT4O_TOKENIZER_DIR TEXT_FILE REPS OUT_DIR   -> JSON on stdout

tiktoken would download o200k_base from the internet; these machines have none, so its Encoding
is built here from the tokenizer.json's vocabulary (ids are o200k's ranks), pattern and special
tokens instead.
"""
import json
import os
import sys
import time

import tiktoken
from tokenizers import Tokenizer


def gpt2_byte_decoder():
    # Byte-level vocabularies spell each byte as a printable character (GPT-2's table).
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


def tiktoken_from_tokenizer_json(path):
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    decode = gpt2_byte_decoder()
    ranks = {bytes(decode[c] for c in token): rank for token, rank in spec["model"]["vocab"].items()}
    split = next(p for p in spec["pre_tokenizer"]["pretokenizers"] if p["type"] == "Split")
    special = {t["content"]: t["id"] for t in spec["added_tokens"]}
    return tiktoken.Encoding("o200k_base_from_tokenizer_json", pat_str=split["pattern"]["Regex"],
                             mergeable_ranks=ranks, special_tokens=special)


def best_of(reps, encode, text):
    seconds, ids = [], None
    for _ in range(reps):
        start = time.perf_counter()
        ids = encode(text)
        seconds.append(time.perf_counter() - start)
    return seconds, ids


def main():
    tokenizer_dir, text_path, reps, out_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with open(text_path, encoding="utf-8") as f:
        text = f.read()
    tokenizer_json = os.path.join(tokenizer_dir, "tokenizer.json")
    hf = Tokenizer.from_file(tokenizer_json)
    runs = {"tiktoken": tiktoken_from_tokenizer_json(tokenizer_json).encode_ordinary,
            "hf_tokenizers": lambda t: hf.encode(t, add_special_tokens=False).ids}
    result = {"bytes": len(text.encode("utf-8"))}
    for name, encode in runs.items():
        seconds, ids = best_of(reps, encode, text)
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump(ids, f)
        result[name] = {"seconds": seconds, "tokens": len(ids)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
