"""Compares two Loom checkpoints (safetensors backend) of the same dlrm run, for row_sharded_test.

  compare_checkpoints.py A_DIR B_DIR
  compare_checkpoints.py A_DIR EXPORTED.safetensors   (the model's weights alone)

Prints one JSON line: the largest difference of any model, optimizer or sparse optimizer
tensor relative to that tensor's largest magnitude in A ("worst"), whether every such tensor is
bitwise equal ("exact"), and the table rows no step touched in A (rowwise_adagrad's accumulator
still 0 there) with how many of them differ in B at all ("untouched_rows", "untouched_differ").
"""
import json
import pathlib
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file


def load(folder):
    """The checkpoint's tensors under their whole names. A row-sharded save is one folder per
    rank (rank-00000, ...): rank 0's holds everything but the tables' rows; every part holds its
    rows of each table as shard/rows/<name>, and its metadata (the "loom" entry, key "part",
    "rows") says which. The rows are put together in rank order, checking they follow on."""
    folder = pathlib.Path(folder)
    if folder.suffix == ".safetensors":  # `host checkpoint export`'s file: the model's weights alone
        return {"model/" + k: v for k, v in load_file(folder).items()}
    parts = sorted(folder.glob("rank-*"))
    if not parts:
        return load_file(folder / "state.safetensors")
    out = {k: v for k, v in load_file(parts[0] / "state.safetensors").items() if not k.startswith("shard/")}
    pieces = {}
    for rank, part in enumerate(parts):
        path = part / "state.safetensors"
        with safe_open(path, "pt") as f:
            info = json.loads(f.metadata()["loom"])["part"]
        assert info["rank"] == rank, (path, info["rank"])
        tensors = load_file(path)
        for name, (first, count) in info["rows"].items():
            got = pieces.setdefault(name, [])
            assert first == sum(len(p) for p in got), (path, name, first)
            assert len(tensors["shard/rows/" + name]) == count, (path, name)
            got.append(tensors["shard/rows/" + name])
    for name, got in pieces.items():
        out[name] = torch.cat(got)
    return out


def main(a_dir, b_dir):
    a = load(a_dir)
    b = load(b_dir)
    kinds = ("model",) if b_dir.endswith(".safetensors") else ("model", "optimizer", "sparse_optimizer")
    keys = [k for k in a if k.split("/")[0] in kinds]
    missing = sorted(set(keys) ^ {k for k in b if k.split("/")[0] in kinds})
    worst, exact = 0.0, not missing
    for k in keys:
        if k not in b or a[k].shape != b[k].shape:
            exact, worst = False, float("inf")
            continue
        x, y = a[k].double(), b[k].double()
        worst = max(worst, ((x - y).abs().max() / x.abs().max().clamp_min(1e-30)).item())
        exact = exact and bool((a[k] == b[k]).all())
    untouched = differ = 0
    for k in keys if "sparse_optimizer" in kinds else []:
        if not k.startswith("sparse_optimizer/sum."):
            continue
        table = f"model/tables.{k.rsplit('.', 1)[1]}.weight"
        rows = a[k] == 0
        untouched += int(rows.sum())
        differ += int((a[table][rows] != b[table][rows]).any(1).sum())
    print(json.dumps({"worst": worst, "exact": exact, "missing": missing, "untouched_rows": untouched,
                      "untouched_differ": differ}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
