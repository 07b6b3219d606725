"""tools/bench/gpu_hf.py: the Hugging Face rows of tools/bench/gpu (--model llama, --model qwen3).

The model is a folder that transformers itself writes (`save_pretrained` of a randomly
initialised LlamaForCausalLM or Qwen3ForCausalLM), which both sides load: the host through
`hf_causal_lm`, the PyTorch runners through the same transformers class (sdpa attention), eager
or under torch.compile. The parent process imports nothing of torch: the shapes, the parameter
count, the FLOPs per token and the host's [model] table live here; the model itself is made
only inside the worker subprocesses (make_folder, load_model).

Shapes, from the published config.json files (facts, not code): Llama-3.2-1B (hidden 2048, 16
layers, 32 heads, 8 key/value heads of 64, SwiGLU 8192, vocabulary 128256, rope theta 500000
with llama3 scaling factor 32, tied embeddings: 1.24 B parameters) and Qwen3-0.6B (hidden 1024,
28 layers, 16 heads, 8 key/value heads of 128, SwiGLU 3072, q/k RMSNorm, vocabulary 151936,
rope theta 1e6, tied: 0.60 B parameters).
"""

SHAPES = {
    "llama": dict(arch="LlamaForCausalLM", layers=16, embd=2048, heads=32, kv_heads=8, head_dim=64, ffn=8192,
                  vocab=128256, rope_theta=500000.0, rms_eps=1e-5, qk_norm=False, seq=2048, batch=4,
                  rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192},
                  max_positions=131072),
    "qwen3": dict(arch="Qwen3ForCausalLM", layers=28, embd=1024, heads=16, kv_heads=8, head_dim=128, ffn=3072,
                  vocab=151936, rope_theta=1000000.0, rms_eps=1e-6, qk_norm=True, seq=2048, batch=4, rope_scaling=None,
                  max_positions=40960),
}


def fill_shape(model, given):
    """The run's shape: SHAPES[model] with what --layers, --embd, --heads, --vocab, --seq, --batch
    gave (None: the shape's). A width or head count other than the shape's keeps its ratios:
    head_dim = embd / heads, key/value heads and the SwiGLU width scaled alike."""
    s = dict(SHAPES[model])
    for key in ("layers", "vocab", "seq", "batch"):
        if given.get(key) is not None:
            s[key] = given[key]
    embd, heads = given.get("embd") or s["embd"], given.get("heads") or s["heads"]
    if (embd, heads) != (s["embd"], s["heads"]):
        if embd % heads:
            raise ValueError(f"--embd {embd} must be a multiple of --heads {heads}")
        s.update(kv_heads=max(1, heads * s["kv_heads"] // s["heads"]), head_dim=embd // heads,
                 ffn=embd * s["ffn"] // s["embd"], embd=embd, heads=heads)
    return s


def param_count(c):
    """Every parameter, the tied embedding once."""
    C, H, KV, D, F, V, L = c["embd"], c["heads"], c["kv_heads"], c["head_dim"], c["ffn"], c["vocab"], c["layers"]
    per_layer = C * H * D + 2 * C * KV * D + H * D * C + 3 * C * F + 2 * C + (2 * D if c["qk_norm"] else 0)
    return V * C + L * per_layer + C


def flops_per_token(c):
    """(N, 6N + 12 L (H D) T): N every parameter (the tied embedding counts, as the output layer's
    matrix product), the attention term from the query width."""
    n = param_count(c)
    return n, 6.0 * n + 12.0 * c["layers"] * c["heads"] * c["head_dim"] * c["seq"]


def host_model_table(c):
    return f"""[model]
use = "hf_causal_lm"
from = "{c['folder']}"
seq_len = {c['seq']}
"""


def make_folder(c):
    """Worker side: transformers writes a random model of the shape into c['folder'] (fp32)."""
    import torch
    import transformers

    kwargs = dict(vocab_size=c["vocab"], hidden_size=c["embd"], intermediate_size=c["ffn"],
                  num_hidden_layers=c["layers"], num_attention_heads=c["heads"], num_key_value_heads=c["kv_heads"],
                  head_dim=c["head_dim"], max_position_embeddings=max(c["max_positions"], c["seq"]),
                  rms_norm_eps=c["rms_eps"], tie_word_embeddings=True, attention_bias=False)
    config_class = transformers.LlamaConfig if c["arch"] == "LlamaForCausalLM" else transformers.Qwen3Config
    rope = {"rope_type": "default", "rope_theta": c["rope_theta"]}
    if c["rope_scaling"]:
        rope = dict(c["rope_scaling"], rope_theta=c["rope_theta"])
    config = config_class(rope_parameters=rope, **kwargs)
    config.architectures = [c["arch"]]
    torch.manual_seed(c["seed"])
    model = getattr(transformers, c["arch"])(config).to(torch.float32)
    model.save_pretrained(c["folder"])
    return {"params": sum(p.numel() for p in model.parameters()), "expected": param_count(c)}


def load_model(torch, c):
    """Worker side: the folder's model (transformers' class, sdpa attention) as a module whose
    forward(idx, targets) returns the mean token loss over logits upcast to fp32, as
    transformers' own causal-LM loss computes it."""
    import torch.nn.functional as F
    import transformers

    hf = transformers.AutoModelForCausalLM.from_pretrained(c["folder"], dtype=torch.float32, attn_implementation="sdpa")

    class CausalLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hf = hf

        def forward(self, idx, targets):
            logits = self.hf(input_ids=idx).logits
            return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))

    return CausalLoss()


def decays(name, p):
    """Weight decay on the matrices of the blocks (not embeddings or norms), as hf_causal_lm flags them."""
    return p.dim() >= 2 and "embed_tokens" not in name


