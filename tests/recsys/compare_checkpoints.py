"""Compares two Loom checkpoints (state.safetensors) of the same dlrm run, for row_sharded_test.

  compare_checkpoints.py A_DIR B_DIR

Prints one JSON line: the largest difference of any model, optimizer or sparse optimizer
tensor relative to that tensor's largest magnitude in A ("worst"), whether every such tensor is
bitwise equal ("exact"), and the table rows no step touched in A (rowwise_adagrad's accumulator
still 0 there) with how many of them differ in B at all ("untouched_rows", "untouched_differ").
"""
import json
import sys

from safetensors.torch import load_file


def main(a_dir, b_dir):
    a = load_file(f"{a_dir}/state.safetensors")
    b = load_file(f"{b_dir}/state.safetensors")
    keys = [k for k in a if k.split("/")[0] in ("model", "optimizer", "sparse_optimizer")]
    missing = sorted(set(keys) ^ {k for k in b if k.split("/")[0] in ("model", "optimizer", "sparse_optimizer")})
    worst, exact = 0.0, not missing
    for k in keys:
        if k not in b or a[k].shape != b[k].shape:
            exact, worst = False, float("inf")
            continue
        x, y = a[k].double(), b[k].double()
        worst = max(worst, ((x - y).abs().max() / x.abs().max().clamp_min(1e-30)).item())
        exact = exact and bool((a[k] == b[k]).all())
    untouched = differ = 0
    for k in keys:
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
