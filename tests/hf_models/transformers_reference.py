#!/usr/bin/python3
"""transformers_reference.py: tiny random models written and run by the real transformers (the
version tools/python-requirements.txt pins, 5.x), so hf_causal_lm is checked against the
folders transformers 5 itself saves (rope_parameters, dtype, layer_types) and its own forward.

  transformers_reference.py write --arch ARCH --out DIR [--seed S] [--spelling v5|v4]
      save_pretrained of a random ARCH model (float32 weights) into DIR; v4 rewrites its
      config.json in transformers 4's spelling (which transformers 5 still reads)
  transformers_reference.py logits --model DIR --ids "1,2,3;4,5,6" --out FILE
      {"logits": [[[...]]]}: the folder loaded with from_pretrained, run in float64, eager attention
  transformers_reference.py grads --model DIR --ids ... --targets ... --out FILE
      {"loss", "grads": {name: [...]}}: the summed token cross-entropy and every parameter's gradient
  transformers_reference.py generate --model DIR --ids ... [--new N] --out FILE
      {"tokens": [[...]]}: model.generate, greedy, N new tokens after each row
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: the tests make their models
import torch  # noqa: E402
import transformers  # noqa: E402

# Small enough to run in a second, with every feature the family's config can switch on that
# Loom implements: grouped-query heads, Llama 3 and linear rotary scaling, Qwen3's head_dim and
# q/k norms, Qwen2's biases, sliding windows longer and shorter than the test's sequences.
COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64, initializer_range=0.2, tie_word_embeddings=False)
ARCHS = {
    "llama3": ("LlamaConfig", "LlamaForCausalLM", dict(rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 16})),
    "llama_linear": ("LlamaConfig", "LlamaForCausalLM",
                     dict(rope_parameters={"rope_type": "linear", "rope_theta": 20000.0, "factor": 2.0})),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
    # YaRN with transformers' defaults (beta 32/1, attention factor 0.1 ln(factor) + 1), and with
    # every setting given; dynamic NTK, which changes nothing below max_position_embeddings.
    "llama_yarn": ("LlamaConfig", "LlamaForCausalLM", dict(rope_parameters={
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 16})),
    "qwen2_yarn": ("Qwen2Config", "Qwen2ForCausalLM", dict(rope_parameters={
        "rope_type": "yarn", "rope_theta": 1e6, "factor": 8.0, "original_max_position_embeddings": 8,
        "beta_fast": 16.0, "beta_slow": 2.0, "mscale": 1.0, "mscale_all_dim": 0.5, "truncate": False})),
    "llama_dynamic": ("LlamaConfig", "LlamaForCausalLM",
                      dict(rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0})),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM",
              dict(head_dim=16, rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
    "mistral": ("MistralConfig", "MistralForCausalLM",
                dict(sliding_window=32, rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
    # Windows shorter than the test's 12-token rows: every Mistral layer, and Qwen's layers from
    # max_window_layers on (transformers 5 writes them out as layer_types).
    "mistral_window": ("MistralConfig", "MistralForCausalLM",
                       dict(sliding_window=5, rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
    "qwen2_window": ("Qwen2Config", "Qwen2ForCausalLM",
                     dict(use_sliding_window=True, sliding_window=4, max_window_layers=1,
                          rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
    "qwen3_window": ("Qwen3Config", "Qwen3ForCausalLM",
                     dict(head_dim=16, use_sliding_window=True, sliding_window=3, max_window_layers=0,
                          rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", None),
}


def write(args):
    config_class, model_class, extra = ARCHS[args.arch]
    torch.manual_seed(args.seed)
    if extra is None:  # GPT-2 names its sizes its own way
        config = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                         initializer_range=0.2, bos_token_id=0, eos_token_id=0)
    else:
        config = getattr(transformers, config_class)(**{**COMMON, **sizes(args)}, **extra, **padding(args))
    model = getattr(transformers, model_class)(config)
    model.save_pretrained(args.out)
    if args.spelling == "v4":
        respell_as_transformers4(os.path.join(args.out, "config.json"))


def sizes(args):
    """A larger model than COMMON's, for tests of memory: the sizes given on the command line."""
    given = dict(num_hidden_layers=args.layers, hidden_size=args.hidden_size, intermediate_size=args.intermediate_size)
    return {key: value for key, value in given.items() if value is not None}


def respell_as_transformers4(path):
    """Rewrites a config.json as transformers 4 wrote it: top-level rope_theta and rope_scaling
    (null for the default type) instead of rope_parameters, torch_dtype instead of dtype, and no
    layer_types (transformers 4.4x derived them from use_sliding_window and max_window_layers)."""
    with open(path) as f:
        config = json.load(f)
    rope = config.pop("rope_parameters", None)
    if rope is not None:
        config["rope_theta"] = rope.pop("rope_theta")
        config["rope_scaling"] = None if rope.get("rope_type", "default") == "default" else rope
    if "dtype" in config:
        config["torch_dtype"] = config.pop("dtype")
    config.pop("layer_types", None)
    with open(path, "w") as f:
        json.dump(config, f, indent=2)


def logits(args):
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, attn_implementation="eager")
    model = model.to(torch.float64).eval()
    ids = torch.tensor([[int(t) for t in row.split(",")] for row in args.ids.split(";")])
    with torch.no_grad():
        out = model(input_ids=ids).logits
    with open(args.out, "w") as f:
        json.dump({"logits": out.tolist(), "transformers": transformers.__version__}, f)


def load_float64(path):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
    return model.to(torch.float64)


def parse_ids(text):
    return torch.tensor([[int(t) for t in row.split(",")] for row in text.split(";")])


def grads(args):
    """The summed token cross-entropy of logits(ids) against targets, and every parameter's
    gradient of it, by transformers' parameter name (a tied output layer appears once)."""
    model = load_float64(args.model).eval()  # eval: no dropout (GPT-2's default is 0.1); gradients still flow
    logits = model(input_ids=parse_ids(args.ids)).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), parse_ids(args.targets).reshape(-1),
                                             reduction="sum")
    loss.backward()
    out = {"loss": loss.item(), "grads": {n: p.grad.tolist() for n, p in model.named_parameters() if p.grad is not None}}
    with open(args.out, "w") as f:
        json.dump(out, f)


def generate(args):
    """Greedy generation: max_new tokens after each row of ids, as model.generate gives them."""
    model = load_float64(args.model).eval()
    with torch.no_grad():
        out = model.generate(parse_ids(args.ids), max_new_tokens=args.new, do_sample=False, pad_token_id=0)
    with open(args.out, "w") as f:
        json.dump({"tokens": out.tolist()}, f)


def add_write_command(sub, archs):
    """`write --arch --out [--seed] [--spelling]`, as this script and moe_reference.py take it."""
    w = sub.add_parser("write")
    w.add_argument("--arch", required=True, choices=sorted(archs))
    w.add_argument("--out", required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--layers", type=int, default=None, help="num_hidden_layers (default 2)")
    w.add_argument("--hidden-size", type=int, default=None, help="hidden_size (default 32)")
    w.add_argument("--intermediate-size", type=int, default=None, help="intermediate_size (default 64)")
    w.add_argument("--spelling", choices=("v5", "v4"), default="v5",
                   help="v4: rewrite config.json in transformers 4's spelling after saving")
    w.add_argument("--pad-token-id", type=int, default=None,
                   help="config.pad_token_id (the Llama family's embedding padding_idx)")
    return w


def padding(args):
    """The config keyword for --pad-token-id, if given."""
    return {} if args.pad_token_id is None else {"pad_token_id": args.pad_token_id}


def add_model_command(sub, name, *required):
    """A subcommand that reads --model and --ids and writes --out, with these --options required too."""
    p = sub.add_parser(name)
    for option in ("--model", "--ids", *required, "--out"):
        p.add_argument(option, required=True)
    return p


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    add_write_command(sub, ARCHS)
    add_model_command(sub, "logits")
    add_model_command(sub, "grads", "--targets")
    add_model_command(sub, "generate").add_argument("--new", type=int, default=6)
    args = ap.parse_args()
    {"write": write, "logits": logits, "grads": grads, "generate": generate}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
