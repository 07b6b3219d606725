#!/usr/bin/python3
"""Independent reference for Loom's LoRA adapters (tests/finetune).

Written from:
  - the LoRA paper (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"): a frozen
    weight W0 (out x in) gains a low-rank update, h = W0 x + (alpha / r) B A x with A (r x in) random
    and B (out x r) zero at initialisation, so training starts from the base model;
  - rank-stabilised LoRA (Kalajdzievski 2023): scaling alpha / sqrt(r) instead of alpha / r;
  - PEFT's published on-disk format for LoRA (huggingface/peft), checked against its documentation
    and source at release v0.20.0 (details and sources below);
  - the independent Hugging Face reference ../hf_models/hf_reference.py, reused unchanged for the
    safetensors reader/writer and the float64 forward passes (llama family, qwen2/3, gpt2).
Everything is computed in float64.

    lora_reference.py write-adapter --model BASE_DIR --out DIR --targets q_proj,v_proj --r 4 --alpha 8
                                    [--seed N] [--zero-b] [--rslora] [--dropout P]
    lora_reference.py logits --model BASE_DIR --adapter ADAPTER_DIR --ids "1,2,3;4,5,6" [--out FILE]
    lora_reference.py grads --model BASE_DIR --adapter ADAPTER_DIR --ids IDS --targets IDS [--out FILE]
    lora_reference.py merge --model BASE_DIR --adapter ADAPTER_DIR --out DIR [--dtype F32|F64]
    lora_reference.py check-peft --adapter DIR --model BASE_DIR [--out FILE]

write-adapter: A and B both drawn from N(0, 0.1^2) (own generator, --seed) so that B != 0 and both
  receive gradients; --zero-b gives the paper's start (B = 0, the adapted model equals the base).
logits: [B][T][V] logits of the base with every targeted weight replaced by W0 + scaling * delta.
grads: loss = sum over positions whose target is not -100 of cross-entropy; {"loss", "grads"} where
  grads maps each PEFT tensor name to d loss / d that tensor (A and B float64 leaves, W0 fixed).
merge: a Hugging Face folder holding W0 + scaling * delta (every non-weight file copied); F32 by
  default like an exported model, F64 to compare logits without rounding.
check-peft: validates an adapter folder against PEFT's format and the base folder; prints
  {"ok": true, "tensors": N}, or {"ok": false, "error": "..."} on one line and exits 1.

PEFT facts used here, each checked in huggingface/peft at tag v0.20.0 (commit a5526d27a9d4) and in
its documentation page https://huggingface.co/docs/peft/developer_guides/checkpoint
(source docs/source/developer_guides/checkpoint.md):
  - Files: PeftModel.save_pretrained (src/peft/peft_model.py) writes adapter_model.safetensors
    (SAFETENSORS_WEIGHTS_NAME; adapter_model.bin with safe_serialization=False), adapter_config.json
    (CONFIG_NAME; both names in src/peft/utils/constants.py) and a README.md model card that loading
    does not need. The safetensors metadata is {"format": "pt"}. An adapter not named "default" goes
    into a subfolder of that name.
  - Tensor names: get_peft_model_state_dict (src/peft/utils/save_and_load.py) keeps, for bias "none",
    the state-dict entries containing "lora_" and strips the adapter name, so
    "...q_proj.lora_A.default.weight" is saved as "...q_proj.lora_A.weight". Keys start with
    "base_model.model." (PeftModel.base_model is the LoraModel, whose .model is the transformers model),
    e.g. base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight for Llama and
    base_model.model.transformer.h.0.attn.c_attn.lora_A.weight for GPT-2.
  - Shapes: LoraLayer.update_layer (src/peft/tuners/lora/layer.py) builds lora_A = Linear(in, r) and
    lora_B = Linear(r, out), i.e. weights (r, in) and (out, r). in/out come from _get_in_out_features
    (src/peft/tuners/tuners_utils.py): nn.Linear (out, in) weight; transformers' Conv1D weight is
    (in, out) and read as in, out = weight.shape.
  - Delta: Linear.get_delta_weight returns transpose(B @ A, fan_in_fan_out) * scaling, transpose
    (src/peft/utils/other.py) being .T when fan_in_fan_out: B @ A * s for nn.Linear, (B @ A)^T * s
    for Conv1D's (in, out) weight.
  - Scaling: update_layer sets lora_alpha / r, or lora_alpha / sqrt(r) when use_rslora. rank_pattern
    and alpha_pattern override r and lora_alpha per module (LoraModel._create_and_replace with
    get_pattern_key: the first pattern key k with re.match(r"(.*\\.)?(k)$", module name)).
  - Matching: check_target_module_exists (tuners_utils.py): a string target_modules is a regular
    expression that must fullmatch the module name; a list matches a name equal to an entry or
    ending with "." + entry. exclude_modules (same two forms) and modules_to_save are excluded first.
  - Config: PeftConfigMixin.save_pretrained (src/peft/config.py) writes json.dumps(to_dict(),
    indent=2, sort_keys=True) with sets turned into lists (target_modules is kept as a set, so its
    order is arbitrary); to_dict is dataclasses.asdict minus "runtime_config" (LoraConfig.to_dict).
    save_pretrained writes inference_mode true, fills base_model_name_or_path from the model when
    unset, and writes auto_mapping only when task_type is null. Loading needs only "peft_type"
    (MIN_EXPECTED_CONFIG_KEYS) and drops keys an older PEFT does not know, with a warning.
  - init_lora_weights true means A kaiming-uniform and B zero; false leaves both at nn.Linear's
    default random init (reset_lora_parameters), which is what write-adapter writes unless --zero-b.
  - fan_in_fan_out: PEFT picks the layout from the module type, not from this flag; it warns and
    rewrites the flag (True for Conv1D, False for nn.Linear) when creating each layer.
  - Embeddings targeted by LoRA are stored as lora_embedding_A / lora_embedding_B parameters (no
    ".weight"), a different form this reference does not cover: targeting one is an error here.

Keys in adapter_config.json for LoRA at v0.20.0 (the LoraConfig/PeftConfig dataclass fields minus
runtime_config), all written by write-adapter: alora_invocation_tokens, alpha_pattern, arrow_config,
auto_mapping, base_model_name_or_path, bias, corda_config, ensure_weight_tying, eva_config,
exclude_modules, fan_in_fan_out, inference_mode, init_lora_weights, layer_replication, layers_pattern,
layers_to_transform, loftq_config, lora_alpha, lora_bias, lora_dropout, lora_ga_config,
megatron_config, megatron_core, modules_to_save, monteclora_config, peft_type, peft_version,
qalora_group_size, r, rank_pattern, revision, target_modules, target_parameters, task_type,
trainable_token_indices, use_bdlora, use_dora, use_qalora, use_rslora, velora_config. Older releases
write a subset (v0.10: 24 of them, no peft_version before v0.18); the 19 keys check-peft requires are
present in every release since v0.10.

Differences from what the brief for this file assumed:
  - save_pretrained also writes README.md; .bin instead of .safetensors when safe_serialization=False.
  - target_modules may also be a single string, a regular expression matched with re.fullmatch.
  - exclude_modules, rank_pattern and alpha_pattern change which modules are adapted and their r/alpha.
  - PEFT sets fan_in_fan_out per module from the module type (the flag in a file may be stale);
    check-peft still requires it to match the architecture (true for GPT-2, false otherwise).
  - the config also holds auto_mapping (null with a task_type), peft_version (from v0.18) and many
    keys of other LoRA variants; init_lora_weights may be a string (e.g. "gaussian", "pissa").
  - A merged folder stored in F32 cannot match float64 adapted logits to 1e-12 (rounding of the merged
    weights, ~1e-7 relative); merge --dtype F64 can.
"""
import argparse
import json
import math
import os
import re
import shutil
import sys

import torch

# Import the Hugging Face reference from the source tree without leaving a __pycache__ there.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "hf_models"))
import hf_reference as hf  # noqa: E402

PREFIX = "base_model.model."
STD = 0.1  # of both A and B at write-adapter: large enough that B A visibly moves the logits
# Embedding modules of the supported architectures: PEFT adapts them with lora_embedding_A/B.
EMBEDDINGS = ("embed_tokens", "wte", "wpe")
# The keys a LoRA adapter_config.json carries in every PEFT release since v0.10, and the JSON types
# each may take (None is JSON null); check-peft requires all of them.
REQUIRED = {
    "peft_type": (str,), "task_type": (str, type(None)), "r": (int,), "lora_alpha": (int, float),
    "lora_dropout": (int, float), "target_modules": (list, str), "base_model_name_or_path": (str, type(None)),
    "bias": (str,), "fan_in_fan_out": (bool,), "inference_mode": (bool,), "modules_to_save": (list, type(None)),
    "init_lora_weights": (bool, str), "use_rslora": (bool,), "use_dora": (bool,),
    "layers_to_transform": (list, int, type(None)), "layers_pattern": (list, str, type(None)),
    "rank_pattern": (dict,), "alpha_pattern": (dict,), "revision": (str, type(None)),
}
TASK_TYPES = ("SEQ_CLS", "SEQ_2_SEQ_LM", "CAUSAL_LM", "TOKEN_CLS", "QUESTION_ANS", "FEATURE_EXTRACTION")
# Options that change the forward pass or the saved tensors in ways this reference does not model;
# a value other than the default is refused rather than silently ignored.
DEFAULTS = {"use_dora": False, "bias": "none", "modules_to_save": None, "layers_to_transform": None,
            "layer_replication": None, "lora_bias": False, "target_parameters": None,
            "trainable_token_indices": None, "alora_invocation_tokens": None, "use_bdlora": None}


class Problem(Exception):
    pass


def read_json(path):
    with open(path) as f:
        return json.load(f)


# ---- modules of the base folder, named as PEFT names them ---------------------------------


def base_modules(folder, params):
    """{module name: (tensor name in the folder, conv1d)} for every 2-D X.weight of the folder.
    Module names are those of the transformers model's named_modules(), which PEFT matches and
    puts in its keys: GPT-2 files saved from GPT2Model lack the "transformer." of GPT2LMHeadModel."""
    config = read_json(os.path.join(folder, "config.json"))
    gpt2 = config["model_type"] == "gpt2"
    out = {}
    for key, t in params.items():
        if not key.endswith(".weight") or t.dim() != 2:
            continue
        name = key[:-len(".weight")]
        if gpt2 and not name.startswith("transformer.") and name != "lm_head":
            name = "transformer." + name
        # GPT-2's blocks use transformers' Conv1D, weights stored (in, out); all else is nn.Linear.
        out[name] = (key, gpt2 and name.startswith("transformer.h."))
    return out


def is_embedding(name):
    return name.rsplit(".", 1)[-1] in EMBEDDINGS


def matches(patterns, name):
    """PEFT's rule for target_modules and exclude_modules."""
    if isinstance(patterns, str):
        return re.fullmatch(patterns, name) is not None
    return any(name == p or name.endswith("." + p) for p in patterns)


def pattern_value(pattern, name, default):
    """rank_pattern / alpha_pattern: the first key matching the end of the module name."""
    for key, value in pattern.items():
        if re.match(rf"(.*\.)?({key})$", name):
            return value
    return default


def check_supported(cfg):
    if cfg.get("peft_type") != "LORA":
        raise Problem(f"peft_type is {cfg.get('peft_type')!r}, not 'LORA'")
    for key, default in DEFAULTS.items():
        value = cfg.get(key, default)
        if value != default and not (key == "modules_to_save" and value == []):
            raise Problem(f"{key} = {value!r} is not covered by this reference (expected {default!r})")


def targeted(modules, cfg):
    """Module names adapted under cfg, in the folder's order."""
    exclude = cfg.get("exclude_modules")
    out = []
    for name in modules:
        if exclude and matches(exclude, name):
            continue
        if matches(cfg["target_modules"], name):
            if is_embedding(name):
                raise Problem(f"{name} is an embedding: PEFT stores it as lora_embedding_A/B, not covered here")
            out.append(name)
    return out


def rank_alpha_scaling(cfg, name):
    r = pattern_value(cfg.get("rank_pattern") or {}, name, cfg["r"])
    alpha = pattern_value(cfg.get("alpha_pattern") or {}, name, cfg["lora_alpha"])
    return r, alpha, alpha / (math.sqrt(r) if cfg.get("use_rslora") else r)


def in_out(weight, conv1d):
    rows, cols = weight.shape
    return (rows, cols) if conv1d else (cols, rows)


def delta(a, b, conv1d):
    """B A in the layout of the stored weight: (out, in) for nn.Linear, (in, out) for Conv1D."""
    d = b @ a
    return d.T if conv1d else d

# ---- adapted models -----------------------------------------------------------------------


def load_adapter(folder):
    cfg = read_json(os.path.join(folder, "adapter_config.json"))
    check_supported(cfg)
    return cfg, hf.read_safetensors(os.path.join(folder, "adapter_model.safetensors"))


def adapted(model_dir, params, cfg, lora):
    """params with every targeted weight replaced by W0 + scaling * delta(A, B). lora maps PEFT
    names to tensors (leaves that require grad, for grads)."""
    modules = base_modules(model_dir, params)
    out = dict(params)
    for name in targeted(modules, cfg):
        key, conv1d = modules[name]
        a, b = lora[f"{PREFIX}{name}.lora_A.weight"], lora[f"{PREFIX}{name}.lora_B.weight"]
        out[key] = params[key] + rank_alpha_scaling(cfg, name)[2] * delta(a, b, conv1d)
    return out


def loss_of(model_dir, params, cfg, lora, ids, targets):
    """Sum over positions whose target is not -100 of cross-entropy(logits, target)."""
    logits = hf.logits_of(model_dir, adapted(model_dir, params, cfg, lora), ids)
    keep = targets != -100
    return -torch.log_softmax(logits, dim=-1)[keep, targets[keep]].sum()

# ---- subcommands --------------------------------------------------------------------------


def write_adapter(args):
    params = hf.read_folder(args.model)
    config = read_json(os.path.join(args.model, "config.json"))
    targets = [t for t in args.targets.split(",") if t]
    if not targets or args.r < 1:
        raise Problem("need at least one target and r >= 1")
    modules = base_modules(args.model, params)
    alpha = int(args.alpha) if float(args.alpha).is_integer() else args.alpha
    # Every field PEFT v0.20.0 writes for LoRA, at its defaults except what this adapter sets.
    cfg = {
        "alora_invocation_tokens": None, "alpha_pattern": {}, "arrow_config": None, "auto_mapping": None,
        "base_model_name_or_path": args.model, "bias": "none", "corda_config": None,
        "ensure_weight_tying": False, "eva_config": None, "exclude_modules": None,
        "fan_in_fan_out": config["model_type"] == "gpt2", "inference_mode": True,
        # false is PEFT's "both A and B random"; true its "B zero" (both only matter at creation).
        "init_lora_weights": bool(args.zero_b), "layer_replication": None, "layers_pattern": None,
        "layers_to_transform": None, "loftq_config": {}, "lora_alpha": alpha, "lora_bias": False,
        "lora_dropout": args.dropout, "lora_ga_config": None, "megatron_config": None,
        "megatron_core": "megatron.core", "modules_to_save": None, "monteclora_config": None,
        "peft_type": "LORA", "peft_version": "0.20.0", "qalora_group_size": 16, "r": args.r, "rank_pattern": {},
        "revision": None, "target_modules": sorted(set(targets)), "target_parameters": None,
        "task_type": "CAUSAL_LM", "trainable_token_indices": None, "use_bdlora": None, "use_dora": False,
        "use_qalora": False, "use_rslora": bool(args.rslora), "velora_config": None,
    }
    names = targeted(modules, cfg)
    for t in targets:
        if not any(matches([t], n) for n in names):
            raise Problem(f"target {t!r} matches no 2-D weight of {args.model}")
    gen = torch.Generator().manual_seed(args.seed)
    tensors = []
    for name in names:
        key, conv1d = modules[name]
        n_in, n_out = in_out(params[key], conv1d)
        a = torch.randn(args.r, n_in, generator=gen, dtype=torch.float64) * STD
        b = torch.randn(n_out, args.r, generator=gen, dtype=torch.float64) * STD
        if args.zero_b:
            b = torch.zeros_like(b)
        tensors += [(f"{PREFIX}{name}.lora_A.weight", a), (f"{PREFIX}{name}.lora_B.weight", b)]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "adapter_config.json"), "w") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True))
    hf.write_safetensors(os.path.join(args.out, "adapter_model.safetensors"), tensors, "F32")
    hf.emit({"modules": names, "tensors": len(tensors), "scaling": rank_alpha_scaling(cfg, names[0])[2]}, None)


def logits(args):
    cfg, lora = load_adapter(args.adapter)
    params = hf.read_folder(args.model)
    out = hf.logits_of(args.model, adapted(args.model, params, cfg, lora), hf.parse_ids(args.ids))
    hf.emit({"logits": out.tolist()}, args.out)


def grads(args):
    cfg, lora = load_adapter(args.adapter)
    params = hf.read_folder(args.model)
    leaves = {k: v.clone().requires_grad_(True) for k, v in lora.items()}
    loss = loss_of(args.model, params, cfg, leaves, hf.parse_ids(args.ids), torch.tensor(hf.parse_ids(args.targets)))
    names = list(leaves)
    # allow_unused: a tensor of an untargeted module would get None; report it as zeros.
    got = torch.autograd.grad(loss, [leaves[n] for n in names], allow_unused=True)
    hf.emit({"loss": loss.item(),
             "grads": {n: (g if g is not None else torch.zeros_like(leaves[n])).tolist() for n, g in zip(names, got)}},
            args.out)


def merge(args):
    cfg, lora = load_adapter(args.adapter)
    params = hf.read_folder(args.model)
    merged = adapted(args.model, params, cfg, lora)
    os.makedirs(args.out, exist_ok=True)
    # Copy everything but the weights (config.json, generation and tokenizer files).
    for name in sorted(os.listdir(args.model)):
        path = os.path.join(args.model, name)
        if os.path.isfile(path) and not name.endswith(".safetensors") and name != "model.safetensors.index.json":
            shutil.copyfile(path, os.path.join(args.out, name))
    hf.write_safetensors(os.path.join(args.out, "model.safetensors"), list(merged.items()), args.dtype)
    hf.emit({"tensors": len(merged), "merged": len(targeted(base_modules(args.model, params), cfg))}, None)


def check_peft(args):
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        if not os.path.isfile(os.path.join(args.adapter, name)):
            raise Problem(f"missing {name}")
    try:
        cfg = read_json(os.path.join(args.adapter, "adapter_config.json"))
    except ValueError as e:
        raise Problem(f"adapter_config.json is not JSON: {e}")
    if not isinstance(cfg, dict):
        raise Problem("adapter_config.json is not a JSON object")
    for key, types in REQUIRED.items():
        if key not in cfg:
            raise Problem(f"adapter_config.json lacks {key!r}")
        value = cfg[key]
        # JSON true/false load as bool, a subclass of int: keep them out of the numeric fields.
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise Problem(f"adapter_config.json {key!r} = {value!r} has the wrong JSON type")
    check_supported(cfg)
    if cfg["task_type"] is not None and cfg["task_type"] not in TASK_TYPES:
        raise Problem(f"task_type {cfg['task_type']!r} is not one of PEFT's {TASK_TYPES}")
    if cfg["r"] < 1:
        raise Problem(f"r = {cfg['r']} < 1")
    if isinstance(cfg["target_modules"], list) and not all(isinstance(t, str) for t in cfg["target_modules"]):
        raise Problem("target_modules holds a non-string")
    for key in ("rank_pattern", "alpha_pattern"):
        for k, v in cfg[key].items():
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise Problem(f"{key}[{k!r}] = {v!r} is not a number")
    params = hf.read_folder(args.model)
    config = read_json(os.path.join(args.model, "config.json"))
    if cfg["fan_in_fan_out"] != (config["model_type"] == "gpt2"):
        raise Problem(f"fan_in_fan_out is {cfg['fan_in_fan_out']} for model_type {config['model_type']}")
    try:
        tensors = hf.read_safetensors(os.path.join(args.adapter, "adapter_model.safetensors"))
    except Exception as e:  # any malformed header, dtype or size
        raise Problem(f"adapter_model.safetensors unreadable: {type(e).__name__}: {e}")
    modules = base_modules(args.model, params)
    found = set()
    for key, t in tensors.items():
        m = re.fullmatch(re.escape(PREFIX) + r"(.+)\.lora_([AB])\.weight", key)
        if not m:
            raise Problem(f"tensor {key!r} is not base_model.model.<module>.lora_A/lora_B.weight")
        name, which = m.groups()
        if name not in modules:
            raise Problem(f"tensor {key!r}: the base has no 2-D {name}.weight")
        base_key, conv1d = modules[name]
        n_in, n_out = in_out(params[base_key], conv1d)
        r = rank_alpha_scaling(cfg, name)[0]
        want = (r, n_in) if which == "A" else (n_out, r)
        if tuple(t.shape) != want:
            raise Problem(f"tensor {key!r} has shape {list(t.shape)}, expected {list(want)} "
                          f"(base {base_key} {list(params[base_key].shape)}, r {r})")
        if not torch.isfinite(t).all():
            raise Problem(f"tensor {key!r} holds a non-finite value")
        found.add(name)
    want = targeted(modules, cfg)
    if not want:
        raise Problem("target_modules match no module of the base")
    for name in want:
        for which in "AB":
            if f"{PREFIX}{name}.lora_{which}.weight" not in tensors:
                raise Problem(f"targeted module {name} has no lora_{which}.weight")
    extra = sorted(found - set(want))
    if extra:
        raise Problem(f"tensors for {extra[0]}, which target_modules does not select")
    hf.emit({"ok": True, "tensors": len(tensors)}, args.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write-adapter", help="write a random PEFT LoRA adapter folder for a base folder")
    w.add_argument("--model", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--targets", required=True, help="comma-separated target_modules, e.g. q_proj,v_proj")
    w.add_argument("--r", type=int, required=True)
    w.add_argument("--alpha", type=float, required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--zero-b", action="store_true", help="B = 0 (the paper's initialisation)")
    w.add_argument("--rslora", action="store_true", help="use_rslora: scaling alpha / sqrt(r)")
    w.add_argument("--dropout", type=float, default=0.0, help="lora_dropout written to the config")
    lg = sub.add_parser("logits", help="float64 logits of the adapted model")
    lg.add_argument("--model", required=True)
    lg.add_argument("--adapter", required=True)
    lg.add_argument("--ids", required=True)
    lg.add_argument("--out")
    gr = sub.add_parser("grads", help="summed cross-entropy and its gradients for every lora_A/lora_B")
    gr.add_argument("--model", required=True)
    gr.add_argument("--adapter", required=True)
    gr.add_argument("--ids", required=True)
    gr.add_argument("--targets", required=True, help="target ids shaped like --ids, -100 ignored")
    gr.add_argument("--out")
    mg = sub.add_parser("merge", help="write the merged Hugging Face folder")
    mg.add_argument("--model", required=True)
    mg.add_argument("--adapter", required=True)
    mg.add_argument("--out", required=True)
    mg.add_argument("--dtype", default="F32", choices=["F32", "F64"])
    ck = sub.add_parser("check-peft", help="validate an adapter folder against PEFT's format")
    ck.add_argument("--adapter", required=True)
    ck.add_argument("--model", required=True)
    ck.add_argument("--out")
    args = ap.parse_args()
    run = {"write-adapter": write_adapter, "logits": logits, "grads": grads, "merge": merge,
           "check-peft": check_peft}[args.command]
    try:
        run(args)
    except Problem as e:
        # One line naming the problem, JSON like check-peft's success line, on stdout.
        print(json.dumps({"ok": False, "error": str(e)}))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
