#!/usr/bin/env python3
"""tools/bench/kernel_times.py: where a training step's GPU time goes, from Chrome traces.

  tools/bench/kernel_times.py [--steps N] [--top K] NAME=TRACE.json [NAME=TRACE.json ...]

Reads Kineto traces (the `profiler` hook's on a GPU, or torch.profiler's export_chrome_trace),
sums the device time of every GPU kernel, memcpy and memset ("cat" kernel, gpu_memcpy,
gpu_memset) by kind of work, divides by the number of steps the trace covers, and prints one
column per trace side by side: ms per step in each kind, the sum (the GPU's busy time), the
trace's span per step on the GPU's clock (busy plus idle: an idle gap is the GPU waiting for
the CPU to launch work), and the launches per step. Then each trace's K most expensive kernels.
`tools/bench/gpu --profile A-B` runs it on the traces it records.

The kinds are named by what the kernel's name says (cuBLAS and CUTLASS products, flash or
memory-efficient attention, LayerNorm, softmax and loss, the optimizer's multi-tensor kernels,
reductions, copies and casts, other elementwise); a kernel matching none is "other".
"""
import argparse
import json
import re
import sys

# First match wins: order matters (a fused AdamW kernel is "optimizer", not "elementwise").
KINDS = (
    ("matmul", r"gemm|nvjet|cutlass|xmma|cublas|splitKreduce|Kernel2"),
    ("attention", r"flash|fmha|attention|efficient_attention"),
    ("optimizer", r"adam|multi_tensor|fused_sgd|_foreach"),
    ("layer_norm", r"layer_norm|LayerNorm|RowwiseMoments|GammaBeta|ComputeInternalGradients|ComputeGradient"),
    ("softmax_loss", r"softmax|SoftMax|nll_loss|cross_entropy|log_softmax|scatter_gather|gather_kernel"),
    ("reduce", r"reduce_kernel|Reduce|norm_kernel"),
    ("copy_cast", r"copy|Memcpy|Memset|memset|cat_|CatArray|fill_kernel|FillFunctor|index"),
    ("elementwise", r"elementwise|vectorized|unrolled|gelu|GeluCUDA|Functor"),
)
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def kind_of(name):
    for kind, pattern in KINDS:
        if re.search(pattern, name):
            return kind
    return "other"


def gpu_events(path):
    with open(path) as f:
        trace = json.load(f)
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES and "dur" in e]


def summarize(path, steps):
    events = gpu_events(path)
    if not events:
        raise SystemExit(f"kernel_times: {path} holds no GPU kernels (a CPU run, or the legacy recorder)")
    by_kind, by_name = {}, {}
    for e in events:
        us = float(e["dur"])
        kind = kind_of(e["name"]) if e["cat"] == "kernel" else "copy_cast"  # memcpy, memset
        by_kind[kind] = by_kind.get(kind, 0.0) + us
        by_name[e["name"]] = by_name.get(e["name"], 0.0) + us
    first = min(float(e["ts"]) for e in events)
    last = max(float(e["ts"]) + float(e["dur"]) for e in events)
    return {"by_kind": {k: v / 1e3 / steps for k, v in by_kind.items()},
            "by_name": {k: v / 1e3 / steps for k, v in by_name.items()},
            "busy_ms": sum(by_kind.values()) / 1e3 / steps, "span_ms": (last - first) / 1e3 / steps,
            "launches": len(events) / steps}


def render(summaries, top):
    names = list(summaries)
    kinds = [k for k, _ in KINDS] + ["other"]
    width = max(12, *(len(n) for n in names))
    lines = ["GPU time per step (ms), by kind of kernel",
             "kind".ljust(14) + "".join(n.rjust(width + 2) for n in names)]
    for kind in kinds:
        if any(kind in s["by_kind"] for s in summaries.values()):
            lines.append(kind.ljust(14) + "".join(f"{summaries[n]['by_kind'].get(kind, 0.0):.2f}".rjust(width + 2)
                                                  for n in names))
    for label, key, spec in (("GPU busy", "busy_ms", ".2f"), ("GPU span", "span_ms", ".2f"),
                             ("launches", "launches", ".0f")):
        lines.append(label.ljust(14) + "".join(format(summaries[n][key], spec).rjust(width + 2) for n in names))
    for n in names:
        lines.append("")
        lines.append(f"{n}: the {top} most expensive kernels (ms per step)")
        ranked = sorted(summaries[n]["by_name"].items(), key=lambda kv: -kv[1])[:top]
        for name, ms in ranked:
            lines.append(f"  {ms:8.3f}  {kind_of(name):12s}  {name[:110]}")
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(prog="tools/bench/kernel_times.py", description=__doc__.split("\n")[0],
                                 epilog=__doc__.split("\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1, help="steps each trace covers (times are divided by it)")
    ap.add_argument("--top", type=int, default=12, help="kernels listed per trace")
    ap.add_argument("traces", nargs="+", metavar="NAME=TRACE.json")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.top < 0:
        ap.error("--steps must be >= 1 and --top >= 0")
    summaries = {}
    for spec in a.traces:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            ap.error(f"{spec}: give NAME=TRACE.json")
        summaries[name] = summarize(path, a.steps)
    print(render(summaries, a.top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
