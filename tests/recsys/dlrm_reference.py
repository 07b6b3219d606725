"""Independent reference for Loom's dlrm model plugin (tests/recsys/dlrm_test.cpp).

Reads the JSON the test wrote (options, parameters by name, the batch, Loom's loss, metrics and
gradients) and recomputes DLRM as Naumov et al. (arXiv:1906.00091) define it, in float64:
  x   = bottom MLP over the dense features, ReLU after every layer
  e_f = pooled rows of table f: the bag's incidence counts times the table (sum), divided by the
        bag's size (mean); an empty bag pools to zeros
  z   = x, then every dot product <v_i, v_j> for i > j over v = (x, e_1 .. e_F), row by row
  p   = top MLP over z, ReLU between layers, one logit
  L   = sum over samples of -y log sigmoid(p) - (1 - y) log(1 - sigmoid(p))
Gradients come from autograd on these float64 leaves. Exit 0 when loss, metrics and every
gradient agree to 1e-5 relative (to the largest magnitude of each reference tensor).
"""
import json
import sys

import torch

TOL = 1e-5


def tensor(j):
    return torch.tensor(j["data"], dtype=torch.float64).reshape(j["shape"])


def mlp(x, layers, relu_last):
    for k, (w, b) in enumerate(layers):
        x = x @ w.t() + b
        if relu_last or k + 1 < len(layers):
            x = x.clamp(min=0)
    return x


def pooled(table, values, offsets, f, batch, mean):
    """[B, E]: incidence matrix A (A[b, r] = times row r is in bag (f, b)) times the table."""
    a = torch.zeros(batch, table.shape[0], dtype=torch.float64)
    for b in range(batch):
        ids = values[offsets[f * batch + b]:offsets[f * batch + b + 1]]
        for r in ids:
            a[b, r] += 1.0
        if mean and len(ids) > 0:
            a[b] /= len(ids)
    return a @ table


def main(path):
    rec = json.load(open(path))
    rows, dim, dense = rec["table_rows"], rec["embedding_dim"], rec["dense_features"]
    F = len(rows)
    # The shapes the paper's architecture implies for these options, named as Loom names them.
    widths_bottom = [dense] + rec["bottom_mlp"] + [dim]
    widths_top = [dim + F * (F + 1) // 2] + rec["top_mlp"] + [1]
    expected = {"tables.%d.weight" % f: [rows[f], dim] for f in range(F)}
    for prefix, widths in (("bottom", widths_bottom), ("top", widths_top)):
        for k in range(len(widths) - 1):
            expected["%s.%d.weight" % (prefix, k)] = [widths[k + 1], widths[k]]
            expected["%s.%d.bias" % (prefix, k)] = [widths[k + 1]]
    got = {n: p["shape"] for n, p in rec["params"].items()}
    if got != expected:
        print("parameters differ from the architecture:\n  loom     %s\n  expected %s" % (got, expected))
        return 1
    p = {n: tensor(j).requires_grad_(True) for n, j in rec["params"].items()}
    layers = lambda prefix, n: [(p["%s.%d.weight" % (prefix, k)], p["%s.%d.bias" % (prefix, k)]) for k in range(n)]

    dense_x = tensor(rec["batch"]["dense_features"])
    values = [int(v) for v in rec["batch"]["sparse_ids_values"]["data"]]
    offsets = [int(v) for v in rec["batch"]["sparse_ids_offsets"]["data"]]
    y = tensor(rec["labels"]).reshape(-1)
    B = dense_x.shape[0]

    x = mlp(dense_x, layers("bottom", len(widths_bottom) - 1), relu_last=True)
    v = [x] + [pooled(p["tables.%d.weight" % f], values, offsets, f, B, rec["pooling"] == "mean") for f in range(F)]
    dots = [(v[i] * v[j]).sum(1) for i in range(F + 1) for j in range(i)]
    z = torch.cat([x, torch.stack(dots, 1)], 1)
    logit = mlp(z, layers("top", len(widths_top) - 1), relu_last=False).reshape(-1)
    prob = torch.sigmoid(logit)
    # -log sigmoid(p) = softplus(-p), -log(1 - sigmoid(p)) = softplus(p): stable for any logit.
    loss = (y * torch.nn.functional.softplus(-logit) + (1 - y) * torch.nn.functional.softplus(logit)).sum()
    loss.backward()

    ok = True

    def compare(what, mine, ref):
        nonlocal ok
        ref = ref.detach().double()
        if list(mine.shape) != list(ref.shape):
            print("%s: shape %s, reference %s" % (what, list(mine.shape), list(ref.shape)))
            ok = False
            return
        err = (mine - ref).abs().max().item() / max(ref.abs().max().item(), 1e-12)
        print("%-22s relative error %.2e" % (what, err))
        ok &= err <= TOL

    compare("loss", torch.tensor(rec["loss_sum"]), loss)
    metrics = rec.get("metrics", {})
    for name in ("logloss", "auc"):
        if name not in metrics:
            print("metric %s was not reported" % name)
            ok = False
    if ok:
        compare("metric logloss", tensor(metrics["logloss"]).reshape([]), loss / B)
        compare("metric auc (score)", tensor(metrics["auc"])[:, 0], prob)
        compare("metric auc (label)", tensor(metrics["auc"])[:, 1], y)

    for name, g in rec["grads"].items():
        ref = p[name].grad
        if "rows" in g:
            rows_used = tensor(g["rows"]).long()
            f = int(name.split(".")[1])
            looked_up = sorted(set(values[offsets[f * B]:offsets[(f + 1) * B]]))
            if rows_used.tolist() != looked_up:
                print("%s: gradient rows %s, but the batch looked up %s" % (name, rows_used.tolist(), looked_up))
                ok = False
            mine = torch.zeros(ref.shape, dtype=torch.float64)
            mine[rows_used] = tensor(g["values"])
        else:
            mine = tensor(g["dense"])
        compare("grad " + name, mine, ref)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
