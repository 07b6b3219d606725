#!/usr/bin/python3
"""tools/bench/dlrm_pytorch.py: the PyTorch (Python, eager) baseline that tools/bench/ctr_bench
times against `host run` with the dlrm model.

The same DLRM as plugins/models/dlrm (bottom MLP, one nn.EmbeddingBag(sparse=True) per
categorical feature, pairwise dot interaction, top MLP, BCE with logits), trained on the same
Criteo TSV in the same batches: the file is parsed and hashed as criteo_tsv does
(plugins/datasets/criteo_tsv/criteo_line.hpp) once, before any timing, into the dataset's
feature-major CSR layout. Dense parameters: torch.optim.AdamW (no decay on biases, as the
plugin's NO_DECAY flags); tables: row-wise Adagrad written with index ops, or
torch.optim.SparseAdam (--sparse-optimizer lazy_adam). Prints one JSON object to stdout: the
wall time of each window of --log-every steps, the losses, and the samples/s.

usage: dlrm_pytorch.py --data FILE [--batch-size 2048] [--steps 200] [--table-rows 100000]
           [--threads 2] [--cache FILE.pt] [--sparse-optimizer rowwise_adagrad|lazy_adam] ...
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
from torch import nn

GAMMA = 0x9E3779B97F4A7C15
MASK = (1 << 64) - 1


def splitmix64(z):
    """Vigna's SplitMix64 output mix, on numpy uint64 arrays (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def parse(path, dense, sparse, rows, batch_size):
    """The whole file as full batches: [(labels [B], dense [B, D], values [N], offsets [F*B+1])]."""
    labels, dense_x = [], []
    ids = [[] for _ in range(sparse)]     # hex values of feature f, sample after sample
    counts = [[] for _ in range(sparse)]  # ids of feature f in each sample
    with open(path) as f:
        for line in f:
            cells = line.rstrip("\r\n").split("\t")
            labels.append(int(cells[0]))
            dense_x.append([int(c) if c else 0 for c in cells[1:1 + dense]])
            for k, cell in enumerate(cells[1 + dense:]):
                got = [int(v, 16) for v in cell.split(",")] if cell else []
                ids[k].extend(got)
                counts[k].append(len(got))
    with np.errstate(over="ignore"):
        hashed = []
        for k in range(sparse):
            v = np.array(ids[k], dtype=np.uint64) + np.uint64((GAMMA * (k + 1)) & MASK)
            hashed.append(torch.from_numpy((splitmix64(v) % np.uint64(rows[k])).astype(np.int64)))
    d = np.array(dense_x, dtype=np.float64)
    dense_t = torch.from_numpy(np.where(d > 0, np.log1p(np.maximum(d, 0)), 0).astype(np.float32))
    label_t = torch.tensor(labels, dtype=torch.float32)
    zero = torch.zeros(1, dtype=torch.long)
    starts = [torch.cat([zero, torch.tensor(c, dtype=torch.long).cumsum(0)]) for c in counts]  # per sample
    batches = []
    for b0 in range(0, len(labels) - batch_size + 1, batch_size):  # full batches only
        values, offsets = [], [torch.zeros(1, dtype=torch.long)]
        for k in range(sparse):
            lo, hi = int(starts[k][b0]), int(starts[k][b0 + batch_size])
            values.append(hashed[k][lo:hi])
            offsets.append(starts[k][b0 + 1:b0 + batch_size + 1] - lo + sum(v.numel() for v in values[:-1]))
        batches.append((label_t[b0:b0 + batch_size].clone(), dense_t[b0:b0 + batch_size].clone(),
                        torch.cat(values), torch.cat(offsets)))
    return batches


def mlp(widths, relu_last):
    layers = []
    for i in range(len(widths) - 1):
        lin = nn.Linear(widths[i], widths[i + 1])
        # DLRM's initialisation, as the plugin's.
        nn.init.normal_(lin.weight, 0.0, math.sqrt(2.0 / (widths[i] + widths[i + 1])))
        nn.init.normal_(lin.bias, 0.0, math.sqrt(1.0 / widths[i + 1]))
        layers.append(lin)
        if relu_last or i + 2 < len(widths):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, dense, rows, dim, bottom, top):
        super().__init__()
        self.tables = nn.ModuleList()
        for r in rows:
            bag = nn.EmbeddingBag(r, dim, mode="sum", sparse=True, include_last_offset=True)
            nn.init.uniform_(bag.weight, -math.sqrt(1.0 / r), math.sqrt(1.0 / r))
            self.tables.append(bag)
        F = len(rows)
        self.bottom = mlp([dense] + bottom + [dim], relu_last=True)
        self.top = mlp([dim + F * (F + 1) // 2] + top + [1], relu_last=False)
        self.li, self.lj = torch.tril_indices(F + 1, F + 1, -1)

    def forward(self, dense, values, offsets):
        B, F = dense.shape[0], len(self.tables)
        x = self.bottom(dense)
        vectors = [x]
        for f, table in enumerate(self.tables):  # feature f: offsets[f*B .. (f+1)*B]
            o = offsets[f * B:(f + 1) * B + 1]
            lo = int(o[0])
            vectors.append(table(values[lo:int(o[-1])], o - lo))
        t = torch.stack(vectors, 1)
        dots = torch.bmm(t, t.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([x, dots], 1)).reshape(-1)


class RowwiseAdagrad:
    """One accumulator per row: G[r] += mean(g_r^2); w[r] -= lr g_r / (sqrt(G[r]) + eps)."""

    def __init__(self, weights, lr, eps=1e-8):
        self.weights, self.lr, self.eps = weights, lr, eps
        self.sums = [torch.zeros(w.shape[0]) for w in weights]

    @torch.no_grad()
    def step(self):
        for w, s in zip(self.weights, self.sums):
            g = w.grad.coalesce()
            rows, vals = g.indices()[0], g.values()
            acc = s.index_select(0, rows) + vals.square().mean(1)
            s.index_copy_(0, rows, acc)
            w.index_add_(0, rows, vals / (acc.sqrt() + self.eps).unsqueeze(1), alpha=-self.lr)
            w.grad = None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--dense", type=int, default=13)
    ap.add_argument("--sparse", type=int, default=26)
    ap.add_argument("--table-rows", default="100000", help="one count, or one per feature (',')")
    ap.add_argument("--embedding-dim", type=int, default=16)
    ap.add_argument("--bottom-mlp", default="64,32")
    ap.add_argument("--top-mlp", default="64,32")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--sparse-lr", type=float, default=0.01)
    ap.add_argument("--sparse-optimizer", choices=["rowwise_adagrad", "lazy_adam"], default="rowwise_adagrad")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", help="parsed batches are saved here, and loaded from here when it exists")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rows = [int(r) for r in a.table_rows.split(",")]
    rows = rows * a.sparse if len(rows) == 1 else rows
    # The published SplitMix64 vector (seed 0's first output), so a hashing slip cannot pass.
    assert int(splitmix64(np.array([GAMMA], dtype=np.uint64))[0]) == 0xE220A8397B1DCDAF

    started = time.perf_counter()
    if a.cache and os.path.exists(a.cache):
        batches = torch.load(a.cache)
    else:
        batches = parse(a.data, a.dense, a.sparse, rows, a.batch_size)
        if a.cache:
            torch.save(batches, a.cache)
    load_s = time.perf_counter() - started

    bottom = [int(w) for w in a.bottom_mlp.split(",")]
    top = [int(w) for w in a.top_mlp.split(",")]
    model = DLRM(a.dense, rows, a.embedding_dim, bottom, top)
    dense_params = [p for n, p in model.named_parameters() if not n.startswith("tables.")]
    decay = [p for p in dense_params if p.dim() > 1]
    no_decay = [p for p in dense_params if p.dim() <= 1]
    dense_opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=a.lr)
    weights = [t.weight for t in model.tables]
    if a.sparse_optimizer == "lazy_adam":
        sparse_opt = torch.optim.SparseAdam(weights, lr=a.sparse_lr)
    else:
        sparse_opt = RowwiseAdagrad(weights, a.sparse_lr)
    loss_fn = nn.BCEWithLogitsLoss()  # the mean over samples: the host divides by its units

    windows_ms, losses, window_loss = [], [], 0.0
    t0 = time.perf_counter()
    for step in range(1, a.steps + 1):
        labels, dense, values, offsets = batches[(step - 1) % len(batches)]
        loss = loss_fn(model(dense, values, offsets), labels)
        loss.backward()
        dense_opt.step()
        sparse_opt.step()
        dense_opt.zero_grad(set_to_none=True)
        if a.sparse_optimizer == "lazy_adam":
            sparse_opt.zero_grad(set_to_none=True)
        window_loss += loss.item()
        if step % a.log_every == 0 or step == a.steps:
            now = time.perf_counter()
            n = step % a.log_every or a.log_every
            windows_ms.append(1e3 * (now - t0) / n)
            losses.append(window_loss / n)
            window_loss, t0 = 0.0, now
    print(json.dumps({"load_s": load_s, "batches": len(batches), "window_step_ms": windows_ms, "losses": losses,
                      "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
