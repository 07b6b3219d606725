#!/usr/bin/python3
"""config_sweep.py: every field of the transformers config class of every family hf_causal_lm
imports, varied one at a time, and every key of the config.json transformers saves left out one
at a time, each saved by transformers itself and run by it (issue 49). config_sweep_test.cpp
loads each folder with Loom: it must give these logits to 1e-5 or refuse naming the field.

  config_sweep.py write --out ROOT --ids "1,2,3;4,5,6"
      ROOT/<family>/<variant>/ folders and ROOT/sweep.json:
      {"transformers": version, "fields": {family: [field, ...]},
       "variants": [{"family", "field", "kind": "set"|"without"|"case", "value", "expect",
                     "folder", "logits" | "error"}]}

A field of a config class that this script has no rule for stops it with the field's name: a
new transformers version then fails the test instead of loading something no one has compared.
"""
import argparse
import dataclasses
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from moe_reference import COMMON as MOE_COMMON  # noqa: E402
from transformers_reference import COMMON as DENSE_COMMON  # noqa: E402

# The base model of each family: tiny, with windows short enough (3 to 5 tokens against the test's
# 10-token rows) that switching them on changes the logits.
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(DENSE_COMMON)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(DENSE_COMMON, sliding_window=5)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(DENSE_COMMON, sliding_window=3, max_window_layers=1)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM",
              dict(DENSE_COMMON, head_dim=16, sliding_window=3, max_window_layers=1)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             dict(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64, initializer_range=0.2)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(MOE_COMMON, num_experts=4, moe_intermediate_size=16, shared_expert_intermediate_size=24,
                       sliding_window=3, max_window_layers=2)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(MOE_COMMON, num_experts=4, moe_intermediate_size=16, head_dim=16, sliding_window=3)),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(MOE_COMMON, num_local_experts=4)),
}

# The value each field is set to (booleans are flipped from the base's). Sizes stay small and
# consistent with the base (hidden 32, 4 heads, 2 layers, 64 tokens).
SET = {
    "vocab_size": 80, "hidden_size": 48, "intermediate_size": 40, "num_hidden_layers": 3, "num_attention_heads": 8,
    "num_key_value_heads": 1, "head_dim": 8, "hidden_act": "gelu", "max_position_embeddings": 32,
    "initializer_range": 0.05, "rms_norm_eps": 0.01, "pad_token_id": 5, "bos_token_id": 7, "eos_token_id": 8,
    "pretraining_tp": 2, "rope_parameters": {"rope_type": "linear", "rope_theta": 50000.0, "factor": 2.0},
    "attention_dropout": 0.1, "sliding_window": 2, "max_window_layers": 0,
    "layer_types": ["sliding_attention", "full_attention"],
    # mixtures of experts
    "decoder_sparse_step": 2, "moe_intermediate_size": 24, "shared_expert_intermediate_size": 40,
    "num_experts_per_tok": 1, "num_experts": 3, "num_local_experts": 3, "router_aux_loss_coef": 0.5,
    "mlp_only_layers": [1], "router_jitter_noise": 0.1,
    # GPT-2
    "n_positions": 32, "n_embd": 48, "n_layer": 3, "n_head": 8, "n_inner": 40, "activation_function": "relu",
    "resid_pdrop": 0.3, "embd_pdrop": 0.3, "attn_pdrop": 0.3, "layer_norm_epsilon": 0.01, "summary_type": "last",
    "summary_activation": "tanh", "summary_first_dropout": 0.3,
    # PreTrainedConfig's own fields
    "dtype": "bfloat16", "chunk_size_feed_forward": 4, "id2label": {"0": "a", "1": "b", "2": "c"},
    "label2id": {"a": 0, "b": 1, "c": 2}, "problem_type": "single_label_classification",
}
# Fields no constructor argument can vary: save_pretrained writes them itself (the "without"
# variants still leave each out).
WRITTEN_BY_SAVE = {"transformers_version": "save_pretrained writes the running version",
                   "architectures": "save_pretrained writes the model class"}

# The seven silent differences of issue 49 and their neighbours: (family, name, config keywords,
# config.json edits after saving, what Loom must do: "match" or the key its refusal names).
CASES = [
    ("qwen3_moe", "every layer slides", dict(use_sliding_window=True), {}, "match"),
    ("qwen3_moe", "window null", dict(use_sliding_window=True, sliding_window=None), {}, "match"),
    ("qwen3_moe", "transformers 4 without layer_types",
     dict(use_sliding_window=True, max_window_layers=1), {"transformers_version": "4.51.3"}, "use_sliding_window"),
    ("qwen3_moe", "transformers 4, its rule agreeing",
     dict(use_sliding_window=True, max_window_layers=0), {"transformers_version": "4.51.3"}, "match"),
    ("qwen3_moe", "ignored layer_types that disagree", dict(use_sliding_window=True),
     {"layer_types": ["full_attention", "sliding_attention"]}, "layer_types"),
    ("mistral", "layer_types (AutoModel builds Ministral)",
     dict(layer_types=["full_attention", "sliding_attention"]), {}, "match"),
    ("mistral", "window null", dict(sliding_window=None), {}, "match"),
    ("mistral", "layer_types with window null", dict(sliding_window=None, layer_types=["full_attention", "sliding_attention"]),
     {}, "sliding_window"),
    ("mistral", "layer_types, legacy name", dict(layer_types=["attention", "sliding_attention"]), {}, "match"),
    ("mixtral", "window", dict(sliding_window=3), {}, "match"),
    ("mixtral", "ignored layer_types that disagree", dict(sliding_window=3),
     {"layer_types": ["full_attention", "sliding_attention"]}, "layer_types"),
    ("qwen2_moe", "windows by layer_types", dict(use_sliding_window=True), {}, "match"),
    ("qwen2_moe", "windows, max_window_layers 1", dict(use_sliding_window=True, max_window_layers=1), {}, "match"),
    ("qwen2_moe", "transformers 5 without layer_types", dict(use_sliding_window=True, max_window_layers=1),
     {"layer_types": None}, "match"),
    ("qwen2_moe", "transformers 4 without layer_types", dict(use_sliding_window=True, max_window_layers=1),
     {"layer_types": None, "transformers_version": "4.57.1"}, "use_sliding_window"),
    ("qwen2", "windows from max_window_layers 1", dict(use_sliding_window=True), {}, "match"),
    ("qwen2", "transformers 4 without layer_types", dict(use_sliding_window=True, max_window_layers=0),
     {"layer_types": None, "transformers_version": "4.45.0"}, "match"),
    ("qwen3", "windows from max_window_layers 1", dict(use_sliding_window=True), {}, "match"),
    ("llama", "sliding layer_types", {}, {"layer_types": ["full_attention", "sliding_attention"]}, "layer_types"),
    ("qwen2_moe", "no shared expert", dict(shared_expert_intermediate_size=0), {}, "match"),
    ("llama", "tied with its own stored head", dict(tie_word_embeddings=False), {"tie_word_embeddings": True},
     "tie_word_embeddings"),
    ("llama", "swish", dict(hidden_act="swish"), {}, "match"),
    ("gpt2", "gelu_fast", dict(activation_function="gelu_fast"), {}, "match"),
    ("gpt2", "gelu_pytorch_tanh", dict(activation_function="gelu_pytorch_tanh"), {}, "match"),
]


def config_fields(config_class):
    return [f.name for f in dataclasses.fields(config_class)]


def value_for(field, base_config):
    current = getattr(base_config, field, None)
    if isinstance(current, bool):
        return not current
    if field in SET:
        return SET[field]
    raise SystemExit(f"config_sweep.py: no rule to vary {type(base_config).__name__}.{field}: add one to SET "
                     "(or WRITTEN_BY_SAVE), so that hf_causal_lm is compared with it before anyone loads it")


def save(family, kwargs, edits, folder, seed):
    config_class, model_class, _ = FAMILIES[family]
    torch.manual_seed(seed)
    config = getattr(transformers, config_class)(**kwargs)
    getattr(transformers, model_class)(config).save_pretrained(folder)
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        saved = json.load(f)
    for key, value in edits.items():
        if value is None:
            saved.pop(key, None)
        else:
            saved[key] = value
    with open(path, "w") as f:
        json.dump(saved, f, indent=2)


def logits(folder, ids, dtype):
    # weights read straight from the file in `dtype` (config.json's own dtype is varied too);
    # eager attention and experts (transformers' grouped_mm takes no float64); return_dict is
    # only the Python container of the outputs, and with it false transformers 5.24's own
    # *ForCausalLM.forward fails reading its base model's tuple
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager",
                                                              experts_implementation="eager", dtype=dtype,
                                                              return_dict=True)
    with torch.no_grad():
        return model.eval()(input_ids=ids, return_dict=True).logits.tolist()


def variant(root, family, name, kind, field, value, kwargs, edits, expect, ids, seed):
    folder = os.path.join(root, family, name.replace(" ", "_").replace(",", ""))
    entry = {"family": family, "field": field, "kind": kind, "name": name, "value": value, "expect": expect,
             "folder": folder}
    try:
        save(family, kwargs, edits, folder, seed)
    except Exception as e:  # noqa: BLE001 - transformers refusing to build it is a result too
        entry.update(folder=None, error=f"building: {type(e).__name__}: {e}")
        return entry
    try:
        entry["logits"] = logits(folder, ids, torch.float64)
    except Exception as e:  # noqa: BLE001
        try:  # GPT-2's reorder_and_upcast_attn runs in float32 only; Loom computes in float32 too
            entry["logits"] = logits(folder, ids, torch.float32)
            entry["float32_only"] = f"{type(e).__name__}: {e}"
        except Exception:  # noqa: BLE001 - the float64 error is the one to report
            entry["error"] = f"{type(e).__name__}: {e}"
    return entry


def write(args):
    ids = torch.tensor([[int(t) for t in row.split(",")] for row in args.ids.split(";")])
    out = {"transformers": transformers.__version__, "fields": {}, "variants": []}
    seed = 0
    for family, (config_class, _, base) in FAMILIES.items():
        cls = getattr(transformers, config_class)
        fields = config_fields(cls)
        out["fields"][family] = fields
        base_config = cls(**base)
        base_folder = os.path.join(args.out, family, "base")
        out["variants"].append(variant(args.out, family, "base", "base", "", None, base, {}, "match", ids, seed))
        for field in fields:
            if field in WRITTEN_BY_SAVE:
                continue
            value = value_for(field, base_config)
            seed += 1
            out["variants"].append(variant(args.out, family, f"set {field}", "set", field, value,
                                           dict(base, **{field: value}), {}, None, ids, seed))
        with open(os.path.join(base_folder, "config.json")) as f:
            saved = json.load(f)
        for key in saved:
            out["variants"].append(variant(args.out, family, f"without {key}", "without", key, None, base,
                                           {key: None}, None, ids, 0))
    for family, name, kwargs, edits, expect in CASES:
        seed += 1
        field = expect if expect != "match" else ""
        out["variants"].append(variant(args.out, family, name, "case", field, None,
                                       dict(FAMILIES[family][2], **kwargs), edits, expect, ids, seed))
    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump(out, f)


def sweep_main(write_sweep):
    """The command line of this sweep and of tests/finetune/peft_sweep.py: write --out --ids."""
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("--out", required=True)
    w.add_argument("--ids", required=True)
    write_sweep(ap.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(sweep_main(write))
