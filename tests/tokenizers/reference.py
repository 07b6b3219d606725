"""reference.py: the Python reference for Loom's tokenizer test. Hugging Face's `tokenizers`
(the Rust library behind transformers' fast tokenizers) encodes and decodes every document of a
corpus; the C++ test compares its own ids and text.

    python reference.py TOKENIZER_DIR CORPUS OUT.jsonl

CORPUS: documents as <uint32 little-endian byte length><bytes>. Bytes are decoded as UTF-8 with
errors="replace" (each maximal invalid subpart becomes one U+FFFD, as Unicode recommends).
OUT.jsonl: one line per document, {"ids": [...], "text": decode(ids), "plain": decode(ids,
skip_special_tokens)}; decoding then applies tokenizer_config.json's clean_up_tokenization_spaces
the way transformers' clean_up_tokenization does.
"""
import json
import os
import struct
import sys

from tokenizers import Tokenizer
from transformers.tokenization_utils_base import PreTrainedTokenizerBase


def main():
    tokenizer_dir, corpus_path, out_path = sys.argv[1:4]
    tokenizer = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        clean_up = json.load(f).get("clean_up_tokenization_spaces", False) is True

    def decode(ids, skip):
        # transformers 5 skips this clean-up for BPE models (with a warning); the model authors'
        # config asks for it, and Loom honours the config, so the reference does too.
        text = tokenizer.decode(ids, skip_special_tokens=skip) if ids else ""
        return PreTrainedTokenizerBase.clean_up_tokenization(None, text) if clean_up else text

    with open(corpus_path, "rb") as f:
        corpus = f.read()
    with open(out_path, "w", encoding="utf-8") as out:
        at = 0
        while at < len(corpus):
            (length,) = struct.unpack_from("<I", corpus, at)
            text = corpus[at + 4:at + 4 + length].decode("utf-8", errors="replace")
            at += 4 + length
            ids = tokenizer.encode(text).ids
            out.write(json.dumps({"ids": ids, "text": decode(ids, False), "plain": decode(ids, True)}) + "\n")


if __name__ == "__main__":
    main()
