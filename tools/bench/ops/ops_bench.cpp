// ops_bench.cpp: each op's paths side by side on one device, forward and forward + backward:
// the entry point the models call, its reference, and on CUDA the kernels of loom_ops_cuda.
// Shapes are a GPT-2 124M layer at batch 16 x 1024 (--small: 1 x 128); block attention splits
// the keys into 4 blocks (a ring of 4). One JSON object a line:
// op, path, device, dtype, elements, the median ms of forward and of forward + backward, and
// the ratio of the reference's time to this path's (above 1: faster than the reference).
// cross_entropy_rows, which has no autograd and writes over its input, has the one call's ms.
//
// usage: loom_bench_ops [--device cpu|cuda] [--reps 20] [--small] [--only OP]
// The benchmark of the ops tools/device-check runs on the GPU machine (with --device cuda).
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <loom_ops/add_layer_norm.hpp>
#include <loom_ops/add_rms_norm.hpp>
#include <loom_ops/block_attention.hpp>
#include <loom_ops/gelu_tanh.hpp>
#include <loom_ops/rms_norm.hpp>
#include <loom_ops/rope_heads.hpp>
#include <loom_ops/rotary.hpp>
#include <loom_ops/swiglu.hpp>
#include <loom_ops/moe_permutation.hpp>
#include <loom_ops/chunked_loss.hpp>
#include <loom_ops/cross_entropy_rows.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#ifdef LOOM_BENCH_OPS_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace {

struct Options {
  at::Device device = at::kCPU;
  int reps = 20;
  bool small = false;
  std::string only;  // one op's name: time that op alone
};

void synchronize(const at::Device& device) {
#ifdef LOOM_BENCH_OPS_CUDA
  if (device.is_cuda()) at::cuda::getCurrentCUDAStream().synchronize();
#else
  (void)device;
#endif
}

// The median milliseconds of `reps` calls of f, after three untimed ones.
double median_ms(const std::function<void()>& f, const Options& o) {
  std::vector<double> ms;
  for (int i = 0; i < o.reps + 3; ++i) {
    synchronize(o.device);
    const auto start = std::chrono::steady_clock::now();
    f();
    synchronize(o.device);
    if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

using Path = std::function<at::Tensor(const at::Tensor&)>;

// Times forward and forward + backward of each path on x; the first path is the reference.
void compare(const std::string& op, const at::Tensor& x, const std::vector<std::pair<std::string, Path>>& paths,
             const Options& o) {
  if (!o.only.empty() && o.only != op) return;
  const at::Tensor up = at::randn_like(x);
  double reference_forward = 0, reference_both = 0;
  for (const auto& [name, f] : paths) {
    const double forward = median_ms([&] { at::NoGradGuard no_grad; f(x); }, o);
    const double both = median_ms([&] {
      const at::Tensor input = x.detach().requires_grad_(true);
      torch::autograd::grad({(f(input) * up).sum()}, {input});
    }, o);
    if (reference_forward == 0) reference_forward = forward, reference_both = both;
    std::printf("{\"op\": \"%s\", \"path\": \"%s\", \"device\": \"%s\", \"dtype\": \"%s\", \"elements\": %lld, "
                "\"forward_ms\": %.4f, \"forward_backward_ms\": %.4f, \"reference_over_path\": [%.3f, %.3f]}\n",
                op.c_str(), name.c_str(), o.device.str().c_str(), c10::toString(x.scalar_type()),
                static_cast<long long>(x.numel()), forward, both, reference_forward / forward, reference_both / both);
  }
}

// Times an op that writes over its input (cross_entropy_rows: each row's loss, the gradient over
// the logits), applied again and again to one buffer: a gradient is as good a set of logits as
// any. The first path is the reference.
using RowsPath = at::Tensor (*)(const at::Tensor&, const at::Tensor&, int64_t, bool);
void compare_in_place(const std::string& op, const at::Tensor& logits, const at::Tensor& targets,
                      const std::vector<std::pair<std::string, RowsPath>>& paths, const Options& o) {
  if (!o.only.empty() && o.only != op) return;
  double reference_ms = 0;
  for (const auto& [name, f] : paths) {
    const double ms = median_ms([&, f = f] { f(logits, targets, -100, true); }, o);
    if (reference_ms == 0) reference_ms = ms;
    std::printf("{\"op\": \"%s\", \"path\": \"%s\", \"device\": \"%s\", \"dtype\": \"%s\", \"elements\": %lld, "
                "\"forward_ms\": %.4f, \"reference_over_path\": %.3f}\n",
                op.c_str(), name.c_str(), o.device.str().c_str(), c10::toString(logits.scalar_type()),
                static_cast<long long>(logits.numel()), ms, reference_ms / ms);
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) {
      o.device = at::Device(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      o.reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--small") {
      o.small = true;
    } else if (a == "--only" && i + 1 < argc) {
      o.only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: loom_bench_ops [--device cpu|cuda] [--reps N] [--small] [--only OP]\n");
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.device.is_cuda() && !at::hasCUDA()) {
    std::fprintf(stderr, "loom_bench_ops: --device cuda, but this LibTorch has no CUDA device\n");
    return 2;
  }
  const int64_t B = o.small ? 1 : 16, T = o.small ? 128 : 1024, C = 768, H = 12;
  const at::TensorOptions on = at::TensorOptions().device(o.device);
  std::vector<at::ScalarType> types{at::kFloat};
  if (o.device.is_cuda()) types.push_back(at::kBFloat16);
  for (const at::ScalarType t : types) {
    const at::Tensor mlp = at::randn({B, T, 4 * C}, on.dtype(t));  // the MLP's hidden activations
    std::vector<std::pair<std::string, Path>> gelu{{"reference", loom_ops::reference::gelu_tanh},
                                                   {"entry", loom_ops::gelu_tanh}};
#ifdef LOOM_BENCH_OPS_CUDA
    if (o.device.is_cuda()) gelu.emplace_back("cuda_kernel", loom_ops::cuda::gelu_tanh);
#endif
    compare("gelu_tanh", mlp, gelu, o);

    // SwiGLU on the MLP's hidden activations, x as both gate and up so that backward computes
    // both gradients, as in training (each path then adds them: one add in either).
    const auto both_halves = [](decltype(&loom_ops::swiglu) op) -> Path {
      return [op](const at::Tensor& x) { return op(x, x); };
    };
    std::vector<std::pair<std::string, Path>> swiglus{{"reference", both_halves(loom_ops::reference::swiglu)},
                                                      {"entry", both_halves(loom_ops::swiglu)}};
#ifdef LOOM_BENCH_OPS_CUDA
    if (o.device.is_cuda()) swiglus.emplace_back("cuda_kernel", both_halves(loom_ops::cuda::swiglu));
#endif
    compare("swiglu", mlp, swiglus, o);

    const at::Tensor hidden = at::randn({B, T, C}, on.dtype(t)), weight = at::rand({C}, on) + 0.5;
    const Path norm = [&](const at::Tensor& x) { return loom_ops::rms_norm(x, weight, 1e-5); };
    const Path native = [&](const at::Tensor& x) { return at::rms_norm(x, {C}, weight.to(x.scalar_type()), 1e-5); };
    const Path composed = [&](const at::Tensor& x) { return loom_ops::reference::rms_norm(x, weight, 1e-5); };
    std::vector<std::pair<std::string, Path>> norms{{"reference", composed}, {"at::rms_norm", native}, {"entry", norm}};
#ifdef LOOM_BENCH_OPS_CUDA
    const Path kernel = [&](const at::Tensor& x) { return loom_ops::cuda::rms_norm(x, weight.to(x.scalar_type()), 1e-5); };
    if (o.device.is_cuda()) norms.emplace_back("cuda_kernel", kernel);
#endif
    compare("rms_norm", hidden, norms, o);

    // The residual add and the norm after it (x is the residual stream, delta a branch's output);
    // the path's y, s left to the next layer.
    const at::Tensor delta = at::randn_like(hidden), weight_t = weight.to(t);
    const auto add_norm = [&](decltype(&loom_ops::add_rms_norm) op) -> Path {
      return [&, op](const at::Tensor& x) { return op(x, delta, weight_t, 1e-5).second; };
    };
    std::vector<std::pair<std::string, Path>> add_norms{{"reference", add_norm(loom_ops::reference::add_rms_norm)},
                                                        {"entry", add_norm(loom_ops::add_rms_norm)}};
#ifdef LOOM_BENCH_OPS_CUDA
    if (o.device.is_cuda()) add_norms.emplace_back("cuda_kernel", add_norm(loom_ops::cuda::add_rms_norm));
#endif
    compare("add_rms_norm", hidden, add_norms, o);

    // GPT-2's pair: the residual add and the LayerNorm (with its bias) before the MLP.
    const at::Tensor bias_t = at::randn({C}, on.dtype(t));
    const auto add_layer = [&](decltype(&loom_ops::add_layer_norm) op) -> Path {
      return [&, op](const at::Tensor& x) { return op(x, delta, weight_t, bias_t, 1e-5).second; };
    };
    std::vector<std::pair<std::string, Path>> add_layers{{"reference", add_layer(loom_ops::reference::add_layer_norm)}};
    if (o.device.is_cpu()) add_layers.emplace_back("fused_cpu", add_layer(loom_ops::fused_cpu::add_layer_norm));
#ifdef LOOM_BENCH_OPS_CUDA
    if (o.device.is_cuda()) add_layers.emplace_back("cuda_kernel", add_layer(loom_ops::cuda::add_layer_norm));
#endif
    compare("add_layer_norm", hidden, add_layers, o);

    const loom_ops::Rope rope(T, C / H, 10000.0, o.device);
    const at::Tensor q = at::randn({B, H, T, C / H}, on.dtype(t));
    compare("rotary", q, {{"entry", [&](const at::Tensor& x) { return rope.apply(x); }}}, o);

    // q as the projection gives it, (B, T, H, D), to attention's (B, H, T, D): rotated, and with
    // Qwen3's per-head norm first (each path's result seen as x's shape again: a view).
    const at::Tensor heads = at::randn({B, T, H, C / H}, on.dtype(t)), head_weight = at::rand({C / H}, on) + 0.5;
    for (const bool norm : {false, true}) {
      const at::Tensor w = norm ? head_weight : at::Tensor();
      const auto path = [&, w](decltype(&loom_ops::rope_heads) op) -> Path {
        return [&, w, op](const at::Tensor& x) { return op(rope, x, at::Tensor(), w, 1e-6).transpose(1, 2); };
      };
      std::vector<std::pair<std::string, Path>> paths{{"reference", path(loom_ops::reference::rope_heads)},
                                                      {"entry", path(loom_ops::rope_heads)}};
#ifdef LOOM_BENCH_OPS_CUDA
      if (o.device.is_cuda()) paths.emplace_back("cuda_kernel", path(loom_ops::cuda::rope_heads));
#endif
      compare(norm ? "rope_heads_norm" : "rope_heads", heads, paths, o);
    }

    // A mixture of experts' permutation around its experts, 2 of 8 per token (Mixtral's top-k):
    // each token's rows sorted by expert and their weighted sum back, the experts left out.
    // The fused backward also gives top's gradient, which this bench does not ask of the
    // reference (the models need it).
    const int64_t k = 2;
    const at::Tensor chosen = std::get<1>(at::rand({B * T, 8}, on).topk(k, -1));
    const at::Tensor order = std::get<1>(chosen.reshape({-1}).sort(std::optional<bool>(true), 0, false));
    const at::Tensor top = at::rand({B * T, k}, on.dtype(t));
    const auto round_trip = [&](decltype(&loom_ops::moe_permute) permute, decltype(&loom_ops::moe_combine) combine) -> Path {
      return [&, permute, combine](const at::Tensor& x) { return combine(permute(x, order, k), order, top); };
    };
    std::vector<std::pair<std::string, Path>> moe{
        {"reference", round_trip(loom_ops::reference::moe_permute, loom_ops::reference::moe_combine)},
        {"entry", round_trip(loom_ops::moe_permute, loom_ops::moe_combine)}};
#ifdef LOOM_BENCH_OPS_CUDA
    if (o.device.is_cuda()) moe.emplace_back("cuda_kernel", round_trip(loom_ops::cuda::moe_permute, loom_ops::cuda::moe_combine));
#endif
    compare("moe_permutation", hidden.reshape({B * T, C}), moe, o);

    // Causal attention over the keys in 4 blocks merged by log-sum-exp (ring attention's
    // arithmetic, one process) against softmax over every key at once; x is q, and k = v = q.
    const at::Tensor at_pos = at::arange(T, on.dtype(at::kLong));
    const at::Tensor causal = at::zeros({T, T}, on).masked_fill(at_pos.unsqueeze(0) > at_pos.unsqueeze(1), -INFINITY);
    const double scale = 1.0 / std::sqrt(double(C / H));
    const Path whole = [&](const at::Tensor& x) { return loom_ops::reference::attention(x, x, x, causal, scale); };
    const Path blocks = [&](const at::Tensor& x) {
      const int64_t S = T / 4;
      loom_ops::BlockAttention merged;
      for (int64_t b = 0; b < 4; ++b) {
        const at::Tensor k = x.narrow(2, b * S, S);
        const loom_ops::BlockAttention part = loom_ops::attend_block(x, k, k, causal.narrow(1, b * S, S), scale);
        merged = b == 0 ? part : loom_ops::merge_blocks(merged, part);
      }
      return merged.out;
    };
    compare("block_attention", q, {{"reference", whole}, {"4_blocks", blocks}}, o);

    // The token loss over one chunk of GPT-2's logits (the chunked loss's rows a chunk on this
    // device, 2668 on a GPU; 256 on the CPU to keep the run short): losses and the gradient.
    const int64_t vocab = 50304, chunk = o.device.is_cuda() ? loom_ops::loss_chunk_rows(vocab, at::kCUDA) : 256;
    const at::Tensor logits = at::randn({chunk, vocab}, on.dtype(t)) * 3;
    const at::Tensor targets = at::randint(0, vocab, {chunk}, on.dtype(at::kLong));
    std::vector<std::pair<std::string, RowsPath>> rows{{"reference", loom_ops::reference::cross_entropy_rows},
                                                       {"entry", loom_ops::cross_entropy_rows}};
#ifdef LOOM_BENCH_OPS_CUDA
    if (o.device.is_cuda()) rows.emplace_back("cuda_kernel", loom_ops::cuda::cross_entropy_rows);
#endif
    compare_in_place("cross_entropy_rows", logits, targets, rows, o);
  }
  return 0;
}
