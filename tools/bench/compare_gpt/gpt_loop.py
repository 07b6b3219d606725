#!/usr/bin/python3
"""gpt_loop.py: the PyTorch Python baseline of tools/bench/compare.

The `gpt` model plugin (plugins/models/transformer/gpt2/gpt.cpp) as an nn.Module with Hugging Face's names
and Conv1D layout, the `synthetic` dataset's formula (plugins/datasets/synthetic/synthetic.cpp,
rank 0 of 1) in numpy, and the plain PyTorch loop: optimizer.zero_grad(set_to_none=True),
loss.backward(), torch.nn.utils.clip_grad_norm_, torch.optim.AdamW (its default single-tensor
path in 1.13), loss.item() every step.

Initialization draws from one torch.Generator seeded with the run seed, torch.normal in the
plugin's registration order: the same at::normal calls on the same CPU generator, so the
weights are bit-identical to the plugin's. All batches are generated before the timed loop.
Prints one JSON object on stdout, the same fields as gpt_loop.cpp.

usage: gpt_loop.py --n-layer L --n-head H --n-embd C --seq-len T [--batch 8] [--vocab 256]
         [--steps 50] [--seed 0] [--threads 0] [--lr 3e-4] [--weight-decay 0.1] [--clip 1.0]
         [--noise 0.1] [--init-std 0.02] [--no-peak]
"""
import argparse
import json
import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix64(z):
    """splitmix64's finalizer over a numpy uint64 array (array arithmetic wraps mod 2^64)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def synthetic_batches(seed, steps, B, T, V, noise):
    """[(inputs, targets)] int64 (B, T) tensors, batch n = samples n*B .. n*B+B-1."""
    index = np.arange(steps * B, dtype=np.uint64)
    key = mix64(np.full_like(index, seed) ^ mix64(index + np.uint64(GAMMA)))

    def draw(k):
        return mix64(key + np.uint64(((k + 1) * GAMMA) & MASK64))

    Vu = np.uint64(V)
    x = np.empty((steps * B, T + 1), dtype=np.uint64)
    x[:, 0] = draw(0) % Vu
    for t in range(T):
        k = 2 * t + 1
        unit = (draw(k) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        x[:, t + 1] = np.where(unit < noise, draw(k + 1) % Vu, (x[:, t] * np.uint64(37) + np.uint64(11)) % Vu)
    x = torch.from_numpy(x.astype(np.int64)).view(steps, B, T + 1)
    return [(x[n, :, :T].contiguous(), x[n, :, 1:].contiguous()) for n in range(steps)]


class Conv1D(nn.Module):
    """Hugging Face's Conv1D: y = x W + b with W stored as (in, out)."""

    def __init__(self, weight, bias):
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(bias)

    def forward(self, x):
        y = torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight)
        return y.view(*x.shape[:-1], self.weight.size(1))


class LayerNorm(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.weight = nn.Parameter(torch.full((C,), 1.0))
        self.bias = nn.Parameter(torch.full((C,), 0.0))

    def forward(self, x):
        return F.layer_norm(x, (x.size(-1),), self.weight, self.bias, 1e-5)


class Attention(nn.Module):
    def __init__(self, normal, C, H, std, proj_std):
        super().__init__()
        self.C, self.H = C, H
        self.c_attn = Conv1D(normal((C, 3 * C), std), torch.full((3 * C,), 0.0))
        self.c_proj = Conv1D(normal((C, C), proj_std), torch.full((C,), 0.0))

    def forward(self, x, mask):
        B, T, C = x.shape
        D = C // self.H
        q, k, v = self.c_attn(x).split(self.C, -1)
        q = q.view(B, T, self.H, D).transpose(1, 2)
        k = k.view(B, T, self.H, D).transpose(1, 2)
        v = v.view(B, T, self.H, D).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = torch.softmax(att.masked_fill(mask[:T, :T], float("-inf")), -1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


class Mlp(nn.Module):
    def __init__(self, normal, C, std, proj_std):
        super().__init__()
        self.c_fc = Conv1D(normal((C, 4 * C), std), torch.full((4 * C,), 0.0))
        self.c_proj = Conv1D(normal((4 * C, C), proj_std), torch.full((C,), 0.0))

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    # Submodules are created in the plugin's registration order, so the generator is drawn
    # in the same order: ln_1, c_attn, attn.c_proj, ln_2, c_fc, mlp.c_proj.
    def __init__(self, normal, C, H, std, proj_std):
        super().__init__()
        self.ln_1 = LayerNorm(C)
        self.attn = Attention(normal, C, H, std, proj_std)
        self.ln_2 = LayerNorm(C)
        self.mlp = Mlp(normal, C, std, proj_std)

    def forward(self, x, mask):
        x = x + self.attn(self.ln_1(x), mask)
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, normal, V, L, H, C, T, std):
        super().__init__()
        proj_std = std / math.sqrt(2.0 * L)
        self.wte = nn.Embedding(V, C, _weight=normal((V, C), std))
        self.wpe = nn.Embedding(T, C, _weight=normal((T, C), std))
        self.h = nn.ModuleList(Block(normal, C, H, std, proj_std) for _ in range(L))
        self.ln_f = LayerNorm(C)


class GPT(nn.Module):
    """GPT2LMHeadModel's computation and parameter names; the output layer is wte (tied)."""

    def __init__(self, V, L, H, C, T, std, seed):
        super().__init__()
        g = torch.Generator()
        g.manual_seed(seed)

        def normal(shape, s):
            return torch.normal(0.0, s, shape, generator=g)

        self.transformer = Transformer(normal, V, L, H, C, T, std)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1), persistent=False)
        self.L, self.C, self.T = L, C, T

    def forward(self, inputs, targets):
        tr = self.transformer
        positions = torch.arange(inputs.size(1), dtype=inputs.dtype)
        x = tr.wte(inputs) + tr.wpe(positions)
        for block in tr.h:
            x = block(x, self.mask)
        logits = F.linear(tr.ln_f(x), tr.wte.weight)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="sum",
                               ignore_index=-100)

    def flops_per_token(self):
        n = sum(p.numel() for name, p in self.named_parameters() if name != "transformer.wpe.weight")
        return 6.0 * n + 12.0 * self.L * self.C * self.T


def measure_peak_flops():
    """kernel/train/peak_flops.cpp's CPU probe: best of 3 x 2 products of 1024 x 1024 fp32 matrices."""
    n = 1024
    with torch.no_grad():
        a, b = torch.randn(n, n), torch.randn(n, n)
        c = torch.empty(n, n)
        torch.mm(a, b, out=c)
        best = 0.0
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(2):
                torch.mm(a, b, out=c)
            best = max(best, 2 * 2.0 * n ** 3 / (time.perf_counter() - start))
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-layer", type=int, default=1)
    ap.add_argument("--n-head", type=int, default=2)
    ap.add_argument("--n-embd", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("--init-std", type=float, default=0.02)
    ap.add_argument("--no-peak", action="store_true")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    peak = 0.0 if a.no_peak else measure_peak_flops()
    data = synthetic_batches(a.seed, a.steps, a.batch, a.seq_len, a.vocab, a.noise)
    model = GPT(a.vocab, a.n_layer, a.n_head, a.n_embd, a.seq_len, a.init_std, a.seed)
    model.train()
    # Weight decay on the block matrices only, as the plugin flags it (minGPT's grouping).
    decay = [p for n, p in model.named_parameters()
             if n.endswith(("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"))]
    ids = {id(p) for p in decay}
    no_decay = [p for p in model.parameters() if id(p) not in ids]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    params = list(model.parameters())
    step_ms, losses = [], []
    for inputs, targets in data:
        started = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(inputs, targets) * (1.0 / targets.numel())
        loss.backward()
        losses.append(loss.item())
        torch.nn.utils.clip_grad_norm_(params, a.clip)
        opt.step()
        step_ms.append(1e3 * (time.perf_counter() - started))
    out = {"variant": "python", "threads": torch.get_num_threads(), "peak_flops": peak,
           "params": sum(p.numel() for p in params), "flops_per_token": model.flops_per_token(),
           "tokens_per_step": a.batch * a.seq_len, "step_ms": step_ms, "loss": losses}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
