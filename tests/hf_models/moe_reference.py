#!/usr/bin/python3
"""moe_reference.py: tiny random mixture-of-experts models written and run by the real
transformers (5.x, tools/python-requirements.txt), for hf_causal_lm's Qwen2-MoE, Qwen3-MoE
and Mixtral (tests/hf_models/moe_test.cpp).

  moe_reference.py write --arch ARCH --out DIR [--seed S] [--spelling v5|v4]
      save_pretrained of a random ARCH model (float32; the Hub's per-expert weights); v4 rewrites
      config.json as transformers 4 wrote it (rope_theta, num_experts for Qwen3-MoE)
  moe_reference.py train --model DIR --ids "1,2;3,4" --targets ... --out FILE
      {"loss", "token_loss", "aux_loss", "logits", "grads"} in float64: the summed token
      cross-entropy plus router_aux_loss_coef times transformers' aux_loss per target token (the
      model's own loss is their mean), the logits, and every parameter's gradient of the loss
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transformers_reference import (add_model_command, add_write_command, padding, parse_ids,  # noqa: E402
                                    respell_as_transformers4)

COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64, initializer_range=0.2, tie_word_embeddings=False,
              num_experts_per_tok=2, output_router_logits=True, router_aux_loss_coef=0.05)
ARCHS = {
    # Layer 0 dense (mlp_only_layers), layer 1 sparse, the top 2 renormalised; per-head q/k norms.
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(num_experts=4, moe_intermediate_size=16, head_dim=16, norm_topk_prob=True,
                       mlp_only_layers=[0], rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
    # Every layer sparse, with the shared expert and its sigmoid gate; q/k/v biases.
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(num_experts=4, moe_intermediate_size=16, shared_expert_intermediate_size=24,
                       rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
    # Every layer sparse, experts of intermediate_size, the top 2 always renormalised.
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(num_local_experts=4, sliding_window=None, rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
}


def write(args):
    config_class, model_class, extra = ARCHS[args.arch]
    torch.manual_seed(args.seed)
    config = getattr(transformers, config_class)(**COMMON, **extra, **padding(args))
    getattr(transformers, model_class)(config).save_pretrained(args.out)
    if args.spelling == "v4":
        path = os.path.join(args.out, "config.json")
        respell_as_transformers4(path)
        with open(path) as f:
            config = json.load(f)
        if args.arch == "qwen3_moe" and "num_local_experts" in config:  # transformers 4 named it num_experts
            config["num_experts"] = config.pop("num_local_experts")
        with open(path, "w") as f:
            json.dump(config, f, indent=2)


def hub_named(name, tensor, model_type):
    """transformers 5 keeps each layer's experts fused (experts.gate_up_proj (E, 2F, C),
    experts.down_proj (E, C, F)) and Mixtral's block under mlp; the Hub, and Loom, name every
    expert's matrices apart (Mixtral: block_sparse_moe.experts.j.w1 (gate), w3 (up), w2 (down))."""
    mixtral = model_type == "mixtral"
    if mixtral:
        name = name.replace(".mlp.", ".block_sparse_moe.")
    names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
    if name.endswith("experts.gate_up_proj"):
        base = name[:-len("gate_up_proj")]
        out = {}
        for e, fused in enumerate(tensor):
            gate, up = fused.chunk(2, dim=0)
            out[f"{base}{e}.{names[0]}.weight"], out[f"{base}{e}.{names[1]}.weight"] = gate, up
        return out
    if name.endswith("experts.down_proj"):
        base = name[:-len("down_proj")]
        return {f"{base}{e}.{names[2]}.weight": t for e, t in enumerate(tensor)}
    return {name: tensor}


def train(args):
    # float64, eager attention and experts (transformers' grouped_mm path takes no float64); eval: no
    # dropout, while the router's aux loss is still computed.
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, attn_implementation="eager",
                                                              experts_implementation="eager")
    model = model.to(torch.float64).eval()
    ids, targets = parse_ids(args.ids), parse_ids(args.targets)
    out = model(input_ids=ids, output_router_logits=True)
    token_loss = torch.nn.functional.cross_entropy(out.logits.reshape(-1, out.logits.size(-1)), targets.reshape(-1),
                                                   reduction="sum")
    loss = token_loss + model.config.router_aux_loss_coef * out.aux_loss * targets.numel()
    loss.backward()
    result = {"loss": loss.item(), "token_loss": token_loss.item(), "aux_loss": out.aux_loss.item(),
              "logits": out.logits.tolist(), "transformers": transformers.__version__,
              "grads": {}}
    for n, p in model.named_parameters():
        if p.grad is not None:
            for hub, g in hub_named(n, p.grad, model.config.model_type).items():
                result["grads"][hub] = g.tolist()
    with open(args.out, "w") as f:
        json.dump(result, f)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    add_write_command(sub, ARCHS)
    add_model_command(sub, "train", "--targets")
    args = ap.parse_args()
    {"write": write, "train": train}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
