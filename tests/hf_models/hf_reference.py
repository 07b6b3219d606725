#!/usr/bin/python3
"""Independent reference for Loom's Hugging Face import and export (tests/hf_models).

Written from the published definitions, not from Loom's C++ or from transformers' code:
  - safetensors: the format section of the safetensors README (8-byte little-endian header
    length, JSON header with dtype/shape/data_offsets, packed row-major little-endian data);
  - sharded folders: model.safetensors.index.json = {"metadata": ..., "weight_map": {name: file}};
  - Llama (Touvron et al. 2023): pre-RMSNorm decoder, SwiGLU MLP, rotary embeddings (Su et al.
    2021, RoFormer) in Hugging Face's rotate_half layout (channel i pairs with i + D/2);
  - linear rope scaling (Chen et al. 2023, position interpolation): frequencies / factor;
  - llama3 rope scaling as published with Llama 3.1 (Meta's apply_scaling);
  - grouped-query attention (Ainslie et al. 2023): query head h reads key/value head h // (H/K);
  - Qwen2: biases on q, k, v; Qwen3: RMSNorm over each head of q and k before the rotation,
    head_dim given apart from hidden_size / heads;
  - GPT-2 (Radford et al. 2019): learned positions, pre-LayerNorm, Conv1D weights (in, out),
    gelu_new (the tanh approximation), logits through the token embedding.
Everything is computed in float64 with plain tensor operations, one attention head at a time.

    hf_reference.py write --arch ARCH --out DIR [--seed N] [--dtype F32|F16|BF16] [--shards N]
                          [--vocab-size V] [--max-positions P]
    hf_reference.py logits --model DIR --ids "1,2,3;4,5,6" [--out FILE]
    hf_reference.py sgd --model DIR --ids IDS --targets IDS --lr LR --steps N [--out FILE]
    hf_reference.py greedy --model DIR --ids "1,2,3" --new N [--stop ID,ID] [--out FILE]

ARCH: llama, llama3, llama_linear, mistral, qwen2, qwen3, gpt2. Needs only Python 3 and torch.
"""
import argparse
import json
import math
import os
import struct
import sys

import torch

# ---- safetensors, from the format's README ------------------------------------------------

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
RAW = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
WIDTH = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}


def tensor_bytes(t):
    """Row-major little-endian bytes of t (x86 is little-endian)."""
    return t.contiguous().view(RAW[t.dtype]).numpy().tobytes()


def write_safetensors(path, tensors, dtype):
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors:
        blob = tensor_bytes(t.to(DTYPES[dtype]))
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = bytearray(data[8 + n + begin:8 + n + end])
        dtype = DTYPES[entry["dtype"]]
        flat = torch.frombuffer(raw, dtype=RAW[dtype]).view(dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = flat.reshape(entry["shape"]).to(torch.float64)
    return out


def read_folder(folder):
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for name in files:
        out.update(read_safetensors(os.path.join(folder, name)))
    return out

# ---- tiny random models -------------------------------------------------------------------

LLAMA = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
         "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "attention_bias": False,
         "mlp_bias": False, "rope_scaling": None, "tie_word_embeddings": False,
         "bos_token_id": 1, "eos_token_id": 2}
# llama3: head_dim 8 and theta 500000 give wavelengths 2 pi / f of 6.3, 167, 4443 and 118000
# positions. With original_max_position_embeddings 512, high_freq_factor 4 and low_freq_factor 1
# the bounds are 128 and 512: the first frequency stays, the second is blended, the last two are
# divided by factor, so every branch of the published rule is exercised.
CONFIGS = {
    "llama": ("LlamaForCausalLM", "llama", {}),
    "llama3": ("LlamaForCausalLM", "llama", {
        "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 512}}),
    "llama_linear": ("LlamaForCausalLM", "llama", {"rope_scaling": {"type": "linear", "factor": 2.0}}),
    "mistral": ("MistralForCausalLM", "mistral", {"sliding_window": None, "rms_norm_eps": 1e-6}),
    "qwen2": ("Qwen2ForCausalLM", "qwen2", {"rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
                                            "use_sliding_window": False, "tie_word_embeddings": True}),
    "qwen3": ("Qwen3ForCausalLM", "qwen3", {"head_dim": 16, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
                                            "tie_word_embeddings": True}),
}
GPT2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 64, "n_positions": 64,
        "n_embd": 32, "n_layer": 2, "n_head": 4, "n_inner": None, "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True, "bos_token_id": 0, "eos_token_id": 0}


def random_llama(config, gen):
    def w(*shape, std=0.2):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std

    C, H, K = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]
    D, F, V = config.get("head_dim", C // H), config["intermediate_size"], config["vocab_size"]
    qkv_bias = config["model_type"] == "qwen2" or config.get("attention_bias", False)
    out = [("model.embed_tokens.weight", w(V, C))]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for proj, rows in (("q", H * D), ("k", K * D), ("v", K * D)):
            out.append((p + f"self_attn.{proj}_proj.weight", w(rows, C)))
            if qkv_bias:
                out.append((p + f"self_attn.{proj}_proj.bias", w(rows, std=0.1)))
        out.append((p + "self_attn.o_proj.weight", w(C, H * D)))
        if config["model_type"] == "qwen3":
            out += [(p + "self_attn.q_norm.weight", 1 + w(D, std=0.1)), (p + "self_attn.k_norm.weight", 1 + w(D, std=0.1))]
        out += [(p + "mlp.gate_proj.weight", w(F, C)), (p + "mlp.up_proj.weight", w(F, C)),
                (p + "mlp.down_proj.weight", w(C, F)), (p + "input_layernorm.weight", 1 + w(C, std=0.1)),
                (p + "post_attention_layernorm.weight", 1 + w(C, std=0.1))]
    out.append(("model.norm.weight", 1 + w(C, std=0.1)))
    if not config["tie_word_embeddings"]:
        out.append(("lm_head.weight", w(V, C)))
    return out


def random_gpt2(config, gen):
    def w(*shape, std=0.2):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std

    C, V, P = config["n_embd"], config["vocab_size"], config["n_positions"]
    F = config["n_inner"] or 4 * C
    out = [("transformer.wte.weight", w(V, C)), ("transformer.wpe.weight", w(P, C))]
    for i in range(config["n_layer"]):
        p = f"transformer.h.{i}."
        out += [(p + "ln_1.weight", 1 + w(C, std=0.1)), (p + "ln_1.bias", w(C, std=0.1)),
                (p + "attn.c_attn.weight", w(C, 3 * C)), (p + "attn.c_attn.bias", w(3 * C, std=0.1)),
                (p + "attn.c_proj.weight", w(C, C)), (p + "attn.c_proj.bias", w(C, std=0.1)),
                (p + "ln_2.weight", 1 + w(C, std=0.1)), (p + "ln_2.bias", w(C, std=0.1)),
                (p + "mlp.c_fc.weight", w(C, F)), (p + "mlp.c_fc.bias", w(F, std=0.1)),
                (p + "mlp.c_proj.weight", w(F, C)), (p + "mlp.c_proj.bias", w(C, std=0.1))]
    out += [("transformer.ln_f.weight", 1 + w(C, std=0.1)), ("transformer.ln_f.bias", w(C, std=0.1))]
    return out


def write(args):
    gen = torch.Generator().manual_seed(args.seed)
    if args.arch == "gpt2":
        config = dict(GPT2)
        tensors = random_gpt2(config, gen)
    else:
        architecture, model_type, changes = CONFIGS[args.arch]
        config = dict(LLAMA, architectures=[architecture], model_type=model_type, **changes)
        if args.vocab_size:
            config["vocab_size"] = args.vocab_size
        if args.max_positions:
            config["max_position_embeddings"] = args.max_positions
        tensors = random_llama(config, gen)
    config["torch_dtype"] = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[args.dtype]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}, f)
    if args.shards == 1:
        write_safetensors(os.path.join(args.out, "model.safetensors"), tensors, args.dtype)
        return
    per = math.ceil(len(tensors) / args.shards)
    weight_map, total = {}, 0
    for s in range(args.shards):
        name = f"model-{s + 1:05d}-of-{args.shards:05d}.safetensors"
        part = tensors[s * per:(s + 1) * per]
        write_safetensors(os.path.join(args.out, name), part, args.dtype)
        for tensor_name, t in part:
            weight_map[tensor_name] = name
            total += t.numel() * WIDTH[args.dtype]
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)

# ---- forward passes, from the published definitions --------------------------------------


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def inverse_frequencies(config, D):
    theta = config.get("rope_theta", 10000.0)
    inv = [theta ** (-2.0 * i / D) for i in range(D // 2)]
    scaling = config.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "linear":
        inv = [f / scaling["factor"] for f in inv]
    elif kind == "llama3":
        factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        original = scaling["original_max_position_embeddings"]
        scaled = []
        for f in inv:
            wavelength = 2 * math.pi / f
            if wavelength < original / high:
                scaled.append(f)
            elif wavelength > original / low:
                scaled.append(f / factor)
            else:
                smooth = (original / wavelength - low) / (high - low)
                scaled.append((1 - smooth) * f / factor + smooth * f)
        inv = scaled
    return torch.tensor(inv, dtype=torch.float64)


def rotate(x, inv):
    """x: (T, D) of one head; channel i and channel i + D/2 rotate by angle t * inv[i]."""
    T, D = x.shape
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]  # (T, D/2)
    cos, sin = torch.cos(angle), torch.sin(angle)
    a, b = x[:, :D // 2], x[:, D // 2:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def causal_softmax_attention(q, k, v):
    """One head: q, k, v (T, D) -> (T, D)."""
    T, D = q.shape
    scores = q @ k.T / math.sqrt(D)
    scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def llama_logits(config, p, ids):
    C, H, K = config["hidden_size"], config["num_attention_heads"], config.get("num_key_value_heads") or config["num_attention_heads"]
    D = config.get("head_dim") or C // H
    eps = config["rms_norm_eps"]
    inv = inverse_frequencies(config, D)
    qwen3 = config["model_type"] == "qwen3"

    def linear(x, name):
        y = x @ p[name + ".weight"].T
        return y + p[name + ".bias"] if name + ".bias" in p else y

    rows = []
    for row in ids:
        x = p["model.embed_tokens.weight"][torch.tensor(row)]  # (T, C)
        for i in range(config["num_hidden_layers"]):
            a = f"model.layers.{i}."
            h = rms_norm(x, p[a + "input_layernorm.weight"], eps)
            q, k, v = (linear(h, a + f"self_attn.{n}_proj") for n in "qkv")
            heads = []
            for head in range(H):
                kv = head // (H // K)
                qh, kh, vh = q[:, head * D:(head + 1) * D], k[:, kv * D:(kv + 1) * D], v[:, kv * D:(kv + 1) * D]
                if qwen3:
                    qh = rms_norm(qh, p[a + "self_attn.q_norm.weight"], eps)
                    kh = rms_norm(kh, p[a + "self_attn.k_norm.weight"], eps)
                heads.append(causal_softmax_attention(rotate(qh, inv), rotate(kh, inv), vh))
            x = x + linear(torch.cat(heads, dim=-1), a + "self_attn.o_proj")
            h = rms_norm(x, p[a + "post_attention_layernorm.weight"], eps)
            gate = linear(h, a + "mlp.gate_proj")
            x = x + linear(gate * torch.sigmoid(gate) * linear(h, a + "mlp.up_proj"), a + "mlp.down_proj")
        x = rms_norm(x, p["model.norm.weight"], eps)
        head = p["model.embed_tokens.weight"] if config.get("tie_word_embeddings") else p["lm_head.weight"]
        rows.append(x @ head.T)
    return torch.stack(rows)


def gpt2_logits(config, p, ids):
    p = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in p.items()}
    C, H, eps = config["n_embd"], config["n_head"], config["layer_norm_epsilon"]
    D = C // H

    def layer_norm(x, name):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * p[name + ".weight"] + p[name + ".bias"]

    def conv1d(x, name):  # weights stored (in, out)
        return x @ p[name + ".weight"] + p[name + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    rows = []
    for row in ids:
        x = p["wte.weight"][torch.tensor(row)] + p["wpe.weight"][: len(row)]
        for i in range(config["n_layer"]):
            a = f"h.{i}."
            qkv = conv1d(layer_norm(x, a + "ln_1"), a + "attn.c_attn")
            q, k, v = qkv[:, :C], qkv[:, C:2 * C], qkv[:, 2 * C:]
            heads = [causal_softmax_attention(q[:, h * D:(h + 1) * D], k[:, h * D:(h + 1) * D], v[:, h * D:(h + 1) * D])
                     for h in range(H)]
            x = x + conv1d(torch.cat(heads, dim=-1), a + "attn.c_proj")
            x = x + conv1d(gelu_new(conv1d(layer_norm(x, a + "ln_2"), a + "mlp.c_fc")), a + "mlp.c_proj")
        rows.append(layer_norm(x, "ln_f") @ p["wte.weight"].T)
    return torch.stack(rows)


def logits_of(folder, params, ids):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    forward = gpt2_logits if config["model_type"] == "gpt2" else llama_logits
    return forward(config, params, ids)


def parse_ids(text):
    return [[int(t) for t in row.split(",")] for row in text.split(";")]


def emit(result, out):
    text = json.dumps(result)
    if out:
        with open(out, "w") as f:
            f.write(text)
    else:
        print(text)


def logits(args):
    emit({"logits": logits_of(args.model, read_folder(args.model), parse_ids(args.ids)).tolist()}, args.out)


def sgd(args):
    """Plain SGD on the mean cross-entropy over targets that are not -100; the loss of each
    step is the one computed before that step's update."""
    params = {k: v.clone().requires_grad_(True) for k, v in read_folder(args.model).items()}
    ids, targets = parse_ids(args.ids), torch.tensor(parse_ids(args.targets))
    losses = []
    for _ in range(args.steps):
        out = logits_of(args.model, params, ids)
        keep = targets != -100
        log_probs = torch.log_softmax(out, dim=-1)
        loss = -log_probs[keep, targets[keep]].mean() if keep.any() else out.sum() * 0
        losses.append(loss.item())
        grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
        with torch.no_grad():
            for t, g in zip(params.values(), grads):
                if g is not None:
                    t -= args.lr * g
    emit({"losses": losses}, args.out)


def greedy(args):
    """Greedy decoding: append the arg max of the last position's logits, recomputing the whole
    sequence each step (no cache), until --new tokens or a --stop id."""
    params = read_folder(args.model)
    ids = parse_ids(args.ids)[0]
    stop = {int(t) for t in args.stop.split(",")} if args.stop else set()
    new = []
    for _ in range(args.new):
        nxt = int(torch.argmax(logits_of(args.model, params, [ids + new])[0, -1]))
        new.append(nxt)
        if nxt in stop:
            break
    emit({"ids": new}, args.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write a tiny random Hugging Face folder")
    w.add_argument("--arch", required=True, choices=sorted(CONFIGS) + ["gpt2"])
    w.add_argument("--out", required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    w.add_argument("--shards", type=int, default=1)
    w.add_argument("--vocab-size", type=int, default=0, help="a vocabulary of this size instead of 64")
    w.add_argument("--max-positions", type=int, default=0, help="max_position_embeddings instead of 64 (not gpt2)")
    lg = sub.add_parser("logits", help="float64 logits of a folder for token ids")
    lg.add_argument("--model", required=True)
    lg.add_argument("--ids", required=True)
    lg.add_argument("--out")
    sg = sub.add_parser("sgd", help="losses of plain SGD steps")
    sg.add_argument("--model", required=True)
    sg.add_argument("--ids", required=True)
    sg.add_argument("--targets", required=True)
    sg.add_argument("--lr", type=float, required=True)
    sg.add_argument("--steps", type=int, required=True)
    sg.add_argument("--out")
    gr = sub.add_parser("greedy", help="greedy decoding from token ids")
    gr.add_argument("--model", required=True)
    gr.add_argument("--ids", required=True)
    gr.add_argument("--new", type=int, required=True)
    gr.add_argument("--stop", default="")
    gr.add_argument("--out")
    args = ap.parse_args()
    {"write": write, "logits": logits, "sgd": sgd, "greedy": greedy}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
