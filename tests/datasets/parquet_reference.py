#!/usr/bin/env python3
"""Writes the tables the `parquet` dataset tests read, with the originals, and what they hold.

    parquet_reference.py write OUT --tokenizer DIR [--rows N] [--row-group R]

Writes, under OUT:
  fineweb/data/CC-MAIN-2024-10/000_00000.parquet, 001_00000.parquet  FineWeb's layout: columns
      text, id, token_count, input_ids (list<int32>), written by pyarrow with R-row row groups
  saved/  the same rows through Hugging Face datasets' Dataset.save_to_disk (Arrow IPC stream
      files, state.json, dataset_info.json), in two shards
  reference.json  for every file in the order the dataset reads them (pyarrow's own readers):
      each part's (row group's or record batch's) documents as Hugging Face tokenizers encodes
      them (add_special_tokens False), the end-of-text id, and each part's input_ids rows
"""

import argparse
import json
import os
import sys

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

PIECES = [
    "The quick brown fox jumps over the lazy dog.",
    "Grüße aus Köln — naïve café, déjà vu.",
    "数据并行和张量并行可以组合使用。",
    "def train(step):\n    return loss.backward()  # 🙂",
    "   leading spaces, trailing tabs\t\t",
    "Numbers 1234567890 and 3.14159 and 1e-5.",
    "Emoji 👩‍💻🚀 and Arabic مرحبا بالعالم",
    "",
]


def documents(n):
    """n deterministic documents of varied length and script."""
    out = []
    for i in range(n):
        parts = [PIECES[(i * 7 + k * 3) % len(PIECES)] for k in range(1 + i % 5)]
        out.append(f"Document {i}. " + " ".join(parts) * (1 + i % 3))
    return out


def write(args):
    from tokenizers import Tokenizer
    import datasets

    tok = Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json"))
    config = json.load(open(os.path.join(args.tokenizer, "tokenizer_config.json")))
    eos = config["eos_token"]
    eos = eos["content"] if isinstance(eos, dict) else eos
    eos_id = tok.token_to_id(eos)

    texts = documents(args.rows)
    ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    half = args.rows // 2
    folder = os.path.join(args.out, "fineweb", "data", "CC-MAIN-2024-10")
    os.makedirs(folder, exist_ok=True)
    files = []
    for index, (lo, hi) in enumerate([(0, half), (half, args.rows)]):
        table = pa.table({
            "text": pa.array(texts[lo:hi], pa.string()),
            "id": pa.array([f"<urn:uuid:{i}>" for i in range(lo, hi)]),
            "token_count": pa.array([len(x) for x in ids[lo:hi]], pa.int64()),
            "input_ids": pa.array(ids[lo:hi], pa.list_(pa.int32())),
        })
        path = os.path.join(folder, f"{index:03d}_00000.parquet")
        pq.write_table(table, path, row_group_size=args.row_group)
        files.append(path)

    saved = os.path.join(args.out, "saved")
    datasets.Dataset.from_dict({"text": texts, "input_ids": ids}).save_to_disk(saved, num_shards=2)
    state = json.load(open(os.path.join(saved, "state.json")))
    arrow_files = [os.path.join(saved, f["filename"]) for f in state["_data_files"]]

    def encoded(rows):
        return [tok.encode(t, add_special_tokens=False).ids for t in rows]

    parts = {}
    for path in files:
        reader = pq.ParquetFile(path)
        parts[path] = []
        for g in range(reader.num_row_groups):
            t = reader.read_row_group(g)
            parts[path].append({"ids": encoded(t.column("text").to_pylist()), "input_ids": t.column("input_ids").to_pylist()})
    for path in arrow_files:
        parts[path] = []
        with pa.memory_map(path) as source:
            for batch in ipc.open_stream(source):
                parts[path].append({"ids": encoded(batch.column("text").to_pylist()),
                                    "input_ids": batch.column("input_ids").to_pylist()})
    json.dump({"eos_id": eos_id, "parquet_files": files, "arrow_files": arrow_files, "parts": parts},
              open(os.path.join(args.out, "reference.json"), "w"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("out")
    w.add_argument("--tokenizer", required=True)
    w.add_argument("--rows", type=int, default=120)
    w.add_argument("--row-group", type=int, default=10)
    args = parser.parse_args()
    if args.command == "write":
        write(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
