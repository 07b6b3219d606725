#!/usr/bin/python3
"""peft_original.py: LoRA adapters written and read by the real peft (the version
tools/python-requirements.txt pins), on base folders that transformers itself saved
(tests/hf_models/transformers_reference.py), so Loom's adapters are checked against peft, not a copy.

  peft_original.py write --model BASE --out DIR --targets q_proj,v_proj --r R --alpha A [--seed S]
      get_peft_model + save_pretrained: an adapter whose B is random too (peft starts B at zero,
      which would hide a wrong B), so every adapted layer changes the logits
  peft_original.py logits --model BASE --adapter DIR --ids "1,2;3,4" --out FILE
      {"logits": ...}: PeftModel.from_pretrained on the base, run in float64, eager attention
  peft_original.py fields --out FILE
      {"fields": [every LoraConfig field], "saved": adapter_config.json of a default LoraConfig}
  peft_original.py config --out DIR [--set KEY=JSON ...]
      a LoraConfig (r 4, q_proj) with those fields, saved by peft's own save_pretrained
"""
import argparse
import json
import os
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
import transformers  # noqa: E402
import peft  # noqa: E402


def base_model(path):
    return transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")


def write(args):
    torch.manual_seed(args.seed)
    config = peft.LoraConfig(r=args.r, lora_alpha=args.alpha, target_modules=args.targets.split(","),
                             lora_dropout=0.0, bias="none")
    with warnings.catch_warnings():  # GPT-2's Conv1D: peft switches fan_in_fan_out on and says so
        warnings.simplefilter("ignore")
        model = peft.get_peft_model(base_model(args.model), config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.2)
    model.save_pretrained(args.out)


def logits(args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = peft.PeftModel.from_pretrained(base_model(args.model), args.adapter)
    model = model.to(torch.float64).eval()
    ids = torch.tensor([[int(t) for t in row.split(",")] for row in args.ids.split(";")])
    with torch.no_grad():
        out = model(input_ids=ids).logits
    with open(args.out, "w") as f:
        json.dump({"logits": out.tolist(), "peft": peft.__version__}, f)


def fields(args):
    import dataclasses
    config = peft.LoraConfig(r=4, target_modules=["q_proj"])
    saved = json.loads(json.dumps(config.to_dict(), default=lambda v: sorted(v) if isinstance(v, set) else str(v)))
    with open(args.out, "w") as f:
        json.dump({"fields": [field.name for field in dataclasses.fields(peft.LoraConfig)], "saved": saved,
                   "peft": peft.__version__}, f)


def config(args):
    settings = dict(r=4, target_modules=["q_proj"])
    for item in args.set or []:
        key, value = item.split("=", 1)
        settings[key] = json.loads(value)
    peft.LoraConfig(**settings).save_pretrained(args.out)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("--model", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--targets", required=True)
    w.add_argument("--r", type=int, required=True)
    w.add_argument("--alpha", type=float, required=True)
    w.add_argument("--seed", type=int, default=0)
    lg = sub.add_parser("logits")
    lg.add_argument("--model", required=True)
    lg.add_argument("--adapter", required=True)
    lg.add_argument("--ids", required=True)
    lg.add_argument("--out", required=True)
    fl = sub.add_parser("fields")
    fl.add_argument("--out", required=True)
    cf = sub.add_parser("config")
    cf.add_argument("--out", required=True)
    cf.add_argument("--set", action="append")
    args = ap.parse_args()
    {"write": write, "logits": logits, "fields": fields, "config": config}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
