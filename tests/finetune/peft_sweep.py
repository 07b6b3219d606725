#!/usr/bin/python3
"""peft_sweep.py: every field of peft's LoraConfig set one at a time on a Llama base that
transformers saved, each adapter made and saved by peft itself and run by peft (issue 49).
peft_fields_test.cpp loads each with Loom: peft's logits to 1e-5, or a refusal naming the field.

  peft_sweep.py write --out ROOT --ids "1,2,3;4,5,6"
      ROOT/base (the base model), ROOT/<field>/ (adapters) and ROOT/sweep.json:
      {"peft": version, "fields": [...], "variants": [{"field", "value", "folder", "logits" | "error"}]}

A LoraConfig field this script has no rule for stops it with the field's name.
"""
import dataclasses
import json
import os
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import peft  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from peft.tuners.lora import config as lora_config  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hf_models"))
from config_sweep import sweep_main  # noqa: E402
from transformers_reference import COMMON  # noqa: E402

BASE = dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# The value each field is set to; booleans are flipped, and a field typed as one of peft's
# *Config classes gets that class's defaults.
SET = {
    "task_type": "CAUSAL_LM", "revision": "main", "r": 2, "target_modules": ALL_LINEAR, "exclude_modules": ["v_proj"],
    "lora_alpha": 3, "lora_dropout": 0.2, "bias": "all", "modules_to_save": ["lm_head"],
    "layers_to_transform": [0], "layers_pattern": "layers",
    "rank_pattern": {"q_proj": 2}, "alpha_pattern": {"q_proj": 3}, "megatron_config": {"tensor_model_parallel_size": 1},
    "megatron_core": "megatron.core", "trainable_token_indices": [1, 2], "alora_invocation_tokens": [5, 6],
    "qalora_group_size": 8, "layer_replication": [[0, 2], [1, 2]], "target_parameters": ["mlp.gate_proj.weight"],
}
# Written by peft's save_pretrained itself, not a constructor's choice.
WRITTEN_BY_SAVE = {"peft_type", "auto_mapping", "peft_version", "base_model_name_or_path"}


def value_for(field):
    default = BASE.get(field, field.default if field.default is not dataclasses.MISSING else None)
    if isinstance(default, bool):
        return not default
    if field.name in SET:
        return SET[field.name]
    for name in dir(lora_config):  # a field typed as one of peft's *Config classes
        if name.endswith("Config") and name in str(field.type) and name != "LoraConfig":
            return getattr(lora_config, name)()
    raise SystemExit(f"peft_sweep.py: no rule to vary LoraConfig.{field.name}: add one to SET, so that Loom is "
                     "compared with peft on it before anyone loads such an adapter")


def base_model(path):
    return transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")


def as_json(value):
    return json.loads(json.dumps(value, default=lambda v: type(v).__name__))


def variant(root, base, field, value, ids, seed):
    folder = os.path.join(root, field or "defaults")
    entry = {"field": field, "value": as_json(value), "folder": folder}
    try:
        torch.manual_seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            settings = dict(BASE, **{field: value}) if field else BASE
            model = peft.get_peft_model(base_model(base), peft.LoraConfig(**settings))
        with torch.no_grad():  # every trained tensor away from its start (peft starts B at zero)
            for name, p in model.named_parameters():
                if p.requires_grad:
                    p.add_(torch.randn_like(p) * 0.2)
        model.save_pretrained(folder)
    except Exception as e:  # noqa: BLE001 - peft refusing to build it is a result too
        entry.update(folder=None, error=f"building: {type(e).__name__}: {e}")
        return entry
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = peft.PeftModel.from_pretrained(base_model(base), folder)
        with torch.no_grad():
            entry["logits"] = loaded.to(torch.float64).eval()(input_ids=ids).logits.tolist()
    except Exception as e:  # noqa: BLE001
        entry["error"] = f"{type(e).__name__}: {e}"
    return entry


def write(args):
    ids = torch.tensor([[int(t) for t in row.split(",")] for row in args.ids.split(";")])
    base = os.path.join(args.out, "base")
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**COMMON)).save_pretrained(base)
    fields = [f for f in dataclasses.fields(peft.LoraConfig)]
    out = {"peft": peft.__version__, "fields": [f.name for f in fields], "variants": []}
    out["variants"].append(variant(args.out, base, "", None, ids, 1))
    for seed, field in enumerate(fields, start=2):
        if field.name not in WRITTEN_BY_SAVE:
            out["variants"].append(variant(args.out, base, field.name, value_for(field), ids, seed))
    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    sys.exit(sweep_main(write))
