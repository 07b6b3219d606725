// gpt_loop.cpp: the hand-written LibTorch baseline of tools/bench/compare. No host, no plugins,
// no manifest: the `gpt` model plugin's forward written out again in plain ATen ops, the
// `synthetic` dataset's formula, and a training loop of the kind a LibTorch user writes by hand.
//
// Two layouts:
//   per-param  (the baseline the issue names) every parameter its own tensor; zero_grad sets
//              gradients to none; clipping as torch.nn.utils.clip_grad_norm_ and a per-parameter
//              AdamW as torch::optim::AdamW / torch.optim.AdamW (single-tensor path) do it, op
//              for op, so this loop and tools/bench/compare_gpt/gpt_loop.py give the same losses.
//   flat       the host's own step (kernel/train/flat_params.cpp, kernel/train/trainer.cpp, the adamw
//              plugin) copied by hand: parameters and gradients are views into one buffer,
//              norm/clip/AdamW run over that buffer (the adamw plugin's fused update,
//              plugins/optimizers/adamw/fused_adamw.cpp, linked in), attention and GELU are the
//              plugin's own (on CPU packed_attention.cpp and gelu_tanh.cpp, linked in),
//              and freed CPU memory is kept for the next step as run.cpu_memory_cache does
//              (kernel/train/cpu_memory.cpp, linked in). The host
//              minus everything that is not arithmetic (plugin boundary, events, trackers,
//              prefetch thread, batch check).
//
// Initialization reproduces plugins/models/transformer/gpt2/gpt.cpp exactly: one CPU generator seeded with
// the run seed, at::normal draws in registration order; data reproduces
// plugins/datasets/synthetic/synthetic.cpp (rank 0 of 1). All batches are generated before
// the timed loop. Prints one JSON object on stdout: per-step times and losses, the fp32 GEMM
// peak measured with the host's probe (kernel/train/peak_flops.cpp), parameter and FLOP counts.
//
// usage: loom_bench_gpt_loop --n-layer L --n-head H --n-embd C --seq-len T [--batch 8]
//          [--vocab 256] [--steps 50] [--seed 0] [--threads 0] [--lr 3e-4] [--weight-decay 0.1]
//          [--clip 1.0] [--noise 0.1] [--init-std 0.02] [--layout per-param|flat] [--no-peak]
//          [--attention packed|sdpa]
// --attention (flat layout): packed runs the plugin's CPU kernel (packed_attention.cpp) where it
// applies, sdpa always attention.hpp's scaled_dot_product_attention: the A/B that decides which
// one the plugin keeps on the CPU (tools/bench/README "Attention on the CPU").
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <loom_ops/fused_adamw.hpp>
#include <loom_ops/gelu_tanh.hpp>
#include <loom_ops/packed_attention.hpp>

#include "train/cpu_memory.hpp"
#include "models/transformer/layers/attention.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int64_t V = 256, L = 1, H = 2, C = 32, T = 64, B = 8, steps = 50;
  uint64_t seed = 0;
  int threads = 0;
  double lr = 3e-4, weight_decay = 0.1, clip = 1.0, noise = 0.1, init_std = 0.02;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::string layout = "per-param";
  std::string attention = "packed";
  bool peak = true;
};

Args parse(int argc, char** argv) {
  Args a;
  std::map<std::string, std::string> kv;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--no-peak") { a.peak = false; continue; }
    if (key.rfind("--", 0) != 0 || i + 1 >= argc) throw std::runtime_error("bad argument " + key + "; see the usage");
    kv[key.substr(2)] = argv[++i];
  }
  for (const auto& [k, v] : kv) {
    if (k == "vocab") a.V = std::stoll(v);
    else if (k == "n-layer") a.L = std::stoll(v);
    else if (k == "n-head") a.H = std::stoll(v);
    else if (k == "n-embd") a.C = std::stoll(v);
    else if (k == "seq-len") a.T = std::stoll(v);
    else if (k == "batch") a.B = std::stoll(v);
    else if (k == "steps") a.steps = std::stoll(v);
    else if (k == "seed") a.seed = std::stoull(v);
    else if (k == "threads") a.threads = std::stoi(v);
    else if (k == "lr") a.lr = std::stod(v);
    else if (k == "weight-decay") a.weight_decay = std::stod(v);
    else if (k == "clip") a.clip = std::stod(v);
    else if (k == "noise") a.noise = std::stod(v);
    else if (k == "init-std") a.init_std = std::stod(v);
    else if (k == "layout") a.layout = v;
    else if (k == "attention") a.attention = v;
    else throw std::runtime_error("unknown option --" + k);
  }
  if (a.layout != "per-param" && a.layout != "flat") throw std::runtime_error("--layout is per-param or flat");
  if (a.attention != "packed" && a.attention != "sdpa") throw std::runtime_error("--attention is packed or sdpa");
  if (a.C % a.H != 0) throw std::runtime_error("--n-embd must be a multiple of --n-head");
  return a;
}

// ---- data: plugins/datasets/synthetic/synthetic.cpp, rank 0 of 1 ----------------------------
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

struct Batch {
  at::Tensor inputs, targets;  // int64 (B, T)
};

std::vector<Batch> synthetic_batches(const Args& a) {
  std::vector<Batch> out;
  const uint64_t V = uint64_t(a.V);
  std::vector<uint64_t> x(size_t(a.T + 1));
  for (int64_t n = 0; n < a.steps; ++n) {
    at::Tensor inputs = at::empty({a.B, a.T}, at::kLong), targets = at::empty({a.B, a.T}, at::kLong);
    int64_t* in = inputs.data_ptr<int64_t>();
    int64_t* tg = targets.data_ptr<int64_t>();
    for (int64_t b = 0; b < a.B; ++b) {
      const uint64_t key = mix64(a.seed ^ mix64(uint64_t(n * a.B + b) + kGamma));
      const auto draw = [&](uint64_t k) { return mix64(key + (k + 1) * kGamma); };
      x[0] = draw(0) % V;
      for (int64_t t = 0; t < a.T; ++t) {
        const uint64_t k = 2 * uint64_t(t) + 1;
        const double unit = static_cast<double>(draw(k) >> 11) * 0x1.0p-53;
        x[size_t(t + 1)] = unit < a.noise ? draw(k + 1) % V : (x[size_t(t)] * 37 + 11) % V;
      }
      for (int64_t t = 0; t < a.T; ++t) {
        in[b * a.T + t] = int64_t(x[size_t(t)]);
        tg[b * a.T + t] = int64_t(x[size_t(t + 1)]);
      }
    }
    out.push_back({inputs, targets});
  }
  return out;
}

// ---- model: plugins/models/transformer/gpt2/gpt.cpp ------------------------------------------------------
struct Param {
  std::string name;
  at::Tensor t;
  bool decay;  // the block matrices only, as the plugin's LOOM_PARAM_FLAG_NO_DECAY says
};

struct Block {
  at::Tensor ln_1_w, ln_1_b, c_attn_w, c_attn_b, attn_proj_w, attn_proj_b;
  at::Tensor ln_2_w, ln_2_b, c_fc_w, c_fc_b, mlp_proj_w, mlp_proj_b;
};

struct Gpt {
  int64_t V, L, H, C, T;
  std::vector<Param> params;  // registration order, as the plugin's add_param calls
  at::Tensor wte, wpe, ln_f_w, ln_f_b, mask, mask_bias;
  std::vector<Block> blocks;
  int64_t matmul_params = 0;
  bool plugin_kernels;  // the flat layout: the plugin's attention and GELU (models/transformer/layers/attention.hpp, loom_ops/gelu_tanh.hpp)
  bool packed_kernel;   // --attention packed: the plugin's CPU kernel where it applies

  explicit Gpt(const Args& a)
      : V(a.V), L(a.L), H(a.H), C(a.C), T(a.T), plugin_kernels(a.layout == "flat"), packed_kernel(a.attention == "packed") {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(a.seed);
    const auto normal = [&](at::IntArrayRef shape, double s) { return at::normal(0.0, s, shape, gen); };
    const auto filled = [&](at::IntArrayRef shape, double v) { return at::full(shape, v, at::kCPU); };
    const double proj_std = a.init_std / std::sqrt(2.0 * static_cast<double>(L));
    const auto param = [&](const std::string& n, at::Tensor init, bool decay, bool matmul = true) {
      if (matmul) matmul_params += init.numel();
      init.requires_grad_(true);
      params.push_back({n, init, decay});
      return init;
    };
    wte = param("transformer.wte.weight", normal({V, C}, a.init_std), false);
    wpe = param("transformer.wpe.weight", normal({T, C}, a.init_std), false, /*matmul=*/false);
    for (int64_t i = 0; i < L; ++i) {
      const std::string p = "transformer.h." + std::to_string(i) + ".";
      Block b;
      b.ln_1_w = param(p + "ln_1.weight", filled({C}, 1.0), false);
      b.ln_1_b = param(p + "ln_1.bias", filled({C}, 0.0), false);
      b.c_attn_w = param(p + "attn.c_attn.weight", normal({C, 3 * C}, a.init_std), true);
      b.c_attn_b = param(p + "attn.c_attn.bias", filled({3 * C}, 0.0), false);
      b.attn_proj_w = param(p + "attn.c_proj.weight", normal({C, C}, proj_std), true);
      b.attn_proj_b = param(p + "attn.c_proj.bias", filled({C}, 0.0), false);
      b.ln_2_w = param(p + "ln_2.weight", filled({C}, 1.0), false);
      b.ln_2_b = param(p + "ln_2.bias", filled({C}, 0.0), false);
      b.c_fc_w = param(p + "mlp.c_fc.weight", normal({C, 4 * C}, a.init_std), true);
      b.c_fc_b = param(p + "mlp.c_fc.bias", filled({4 * C}, 0.0), false);
      b.mlp_proj_w = param(p + "mlp.c_proj.weight", normal({4 * C, C}, proj_std), true);
      b.mlp_proj_b = param(p + "mlp.c_proj.bias", filled({C}, 0.0), false);
      blocks.push_back(b);
    }
    ln_f_w = param("transformer.ln_f.weight", filled({C}, 1.0), false);
    ln_f_b = param("transformer.ln_f.bias", filled({C}, 0.0), false);
    mask = at::ones({T, T}, at::TensorOptions().dtype(at::kBool)).triu(1);
    mask_bias = loom_gpt::causal_mask(T, at::kCPU);
  }

  static at::Tensor conv1d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    const at::Tensor y = at::addmm(b, x.reshape({-1, x.size(-1)}), w);
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() = w.size(1);
    return y.view(sizes);
  }

  at::Tensor attention(const Block& b, const at::Tensor& x) const {
    const int64_t Bn = x.size(0), Tn = x.size(1), D = C / H;
    const at::Tensor packed = conv1d(x, b.c_attn_w, b.c_attn_b);
    if (plugin_kernels && packed_kernel && loom_ops::packed_attention_applies(packed, mask_bias, 0.0, false))  // the plugin's CPU path
      return conv1d(loom_ops::packed_causal_attention(packed, H, mask_bias), b.attn_proj_w, b.attn_proj_b);
    const std::vector<at::Tensor> qkv = packed.split(C, -1);
    const at::Tensor q = qkv[0].view({Bn, Tn, H, D}).transpose(1, 2);
    const at::Tensor k = qkv[1].view({Bn, Tn, H, D}).transpose(1, 2);
    const at::Tensor v = qkv[2].view({Bn, Tn, H, D}).transpose(1, 2);
    at::Tensor y;
    if (plugin_kernels) {  // the plugin's own attention, shared source
      y = loom_gpt::causal_attention(q, k, v, mask_bias, 0.0, false);
    } else {  // the textbook sequence a LibTorch user writes
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      at::Tensor att = at::matmul(q, k.transpose(-2, -1)) * scale;
      att = att.masked_fill(mask.narrow(0, 0, Tn).narrow(1, 0, Tn), -std::numeric_limits<double>::infinity());
      y = at::matmul(at::softmax(att, -1), v);
    }
    y = y.transpose(1, 2).reshape({Bn, Tn, C});
    return conv1d(y, b.attn_proj_w, b.attn_proj_b);
  }

  at::Tensor mlp(const Block& b, const at::Tensor& x) const {
    const at::Tensor h = conv1d(x, b.c_fc_w, b.c_fc_b);
    return conv1d(plugin_kernels ? loom_ops::gelu_tanh(h) : at::gelu(h, "tanh"), b.mlp_proj_w, b.mlp_proj_b);
  }

  at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor& targets) const {
    const at::Tensor positions = at::arange(inputs.size(1), inputs.options());
    at::Tensor x = at::embedding(wte, inputs) + at::embedding(wpe, positions);
    for (const Block& b : blocks) {
      x = x + attention(b, at::layer_norm(x, {C}, b.ln_1_w, b.ln_1_b, 1e-5));
      x = x + mlp(b, at::layer_norm(x, {C}, b.ln_2_w, b.ln_2_b, 1e-5));
    }
    x = at::layer_norm(x, {C}, ln_f_w, ln_f_b, 1e-5);
    const at::Tensor logits = at::linear(x, wte);
    return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}), {},
                                  at::Reduction::Sum, -100);
  }

  // PaLM's 6N + 12 L C T, as plugins/models/transformer/layers/model_common.hpp counts it (N without wpe).
  double flops_per_token() const {
    return 6.0 * double(matmul_params) + 12.0 * double(L) * double(C) * double(T);
  }
};

// ---- per-parameter step: torch.nn.utils.clip_grad_norm_ + torch.optim.AdamW ----------------
struct PerParamStep {
  const Args& a;
  Gpt& m;
  std::vector<at::Tensor> exp_avg, exp_avg_sq;
  std::vector<int64_t> all_dims_storage;

  PerParamStep(const Args& args, Gpt& model) : a(args), m(model) {
    for (const Param& p : m.params) {
      exp_avg.push_back(at::zeros_like(p.t));
      exp_avg_sq.push_back(at::zeros_like(p.t));
    }
  }

  double run(const Batch& batch, int64_t step) {
    for (Param& p : m.params) p.t.mutable_grad().reset();  // zero_grad(set_to_none=True)
    const double scale = 1.0 / static_cast<double>(batch.targets.numel());
    const at::Tensor loss = m.loss_sum(batch.inputs, batch.targets) * scale;
    loss.backward();
    const double loss_value = loss.item<double>();
    at::NoGradGuard no_grad;
    // clip_grad_norm_(params, clip): per-parameter norms, the norm of their stack, then
    // max_norm / (total + 1e-6) as Python evaluates it (Tensor.__rtruediv__ = reciprocal * x).
    std::vector<at::Tensor> norms;
    for (const Param& p : m.params) {
      std::vector<int64_t> dims(size_t(p.t.dim()));
      for (size_t d = 0; d < dims.size(); ++d) dims[d] = int64_t(d);
      norms.push_back(at::norm(p.t.grad(), 2.0, dims, false));
    }
    const at::Tensor total = at::norm(at::stack(norms), 2.0, {0}, false);
    const at::Tensor coef = at::clamp((total + 1e-6).reciprocal() * a.clip, c10::nullopt, 1.0);
    for (const Param& p : m.params) p.t.grad().mul_(coef);
    // AdamW, per parameter, as torch::optim::AdamW / torch.optim.AdamW (foreach=False).
    const double bias1 = 1.0 - std::pow(a.beta1, double(step));
    const double bias2 = 1.0 - std::pow(a.beta2, double(step));
    const double step_size = a.lr / bias1;
    const double bias2_sqrt = std::sqrt(bias2);
    for (size_t i = 0; i < m.params.size(); ++i) {
      at::Tensor& p = m.params[i].t;
      const at::Tensor& g = p.grad();
      const double wd = m.params[i].decay ? a.weight_decay : 0.0;
      if (wd != 0) p.mul_(1 - a.lr * wd);
      exp_avg[i].mul_(a.beta1).add_(g, 1 - a.beta1);
      exp_avg_sq[i].mul_(a.beta2).addcmul_(g, g, 1 - a.beta2);
      const at::Tensor denom = (exp_avg_sq[i].sqrt() / bias2_sqrt).add_(a.eps);
      p.addcdiv_(exp_avg[i], denom, -step_size);
    }
    return loss_value;
  }
};

// ---- flat step: kernel/train/flat_params.cpp + kernel/train/trainer.cpp + plugins/optimizers/adamw ------
struct FlatStep {
  const Args& a;
  Gpt& m;
  at::Tensor params, grads, exp_avg, exp_avg_sq, decay_mask;
  loom_ops::AdamWScratch scratch;

  FlatStep(const Args& args, Gpt& model) : a(args), m(model) {
    at::NoGradGuard no_grad;
    int64_t total = 0;
    for (const Param& p : m.params) total += p.t.numel();
    params = at::empty({total}, at::kFloat);
    grads = at::zeros({total}, at::kFloat);
    decay_mask = at::ones({total}, at::kFloat);
    int64_t offset = 0;
    for (auto it = m.params.rbegin(); it != m.params.rend(); ++it) {  // reverse registration order
      at::Tensor& param = it->t;
      const int64_t n = param.numel();
      at::Tensor view = params.narrow(0, offset, n).view(param.sizes());
      view.copy_(param.detach());
      param.set_data(view);
      param.mutable_grad() = grads.narrow(0, offset, n).view(param.sizes());
      if (!it->decay) decay_mask.narrow(0, offset, n).zero_();
      offset += n;
    }
    exp_avg = at::zeros_like(params);
    exp_avg_sq = at::zeros_like(params);
  }

  double run(const Batch& batch, int64_t step) {
    grads.zero_();
    at::Tensor loss_total = at::zeros({});
    const double scale = 1.0 / static_cast<double>(batch.targets.numel());
    const at::Tensor loss = m.loss_sum(batch.inputs, batch.targets);
    (loss * scale).backward();
    loss_total += loss.detach();
    const at::Tensor norm = grads.norm();
    const at::Tensor stats = at::stack({loss_total * scale, norm.to(loss_total.dtype())}).to(at::kCPU, at::kDouble);
    const double loss_value = stats[0].item<double>();
    const at::Tensor coefficient = (a.clip / (norm + 1e-6)).clamp_max(1.0);
    grads.mul_(coefficient.to(grads.device(), grads.scalar_type()));
    at::NoGradGuard no_grad;
    const double bias1 = 1.0 - std::pow(a.beta1, static_cast<double>(step));
    const double bias2_sqrt = std::sqrt(1.0 - std::pow(a.beta2, static_cast<double>(step)));
    loom_ops::adamw_step(params, grads, exp_avg, exp_avg_sq, decay_mask, scratch,
                           {a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, bias1, bias2_sqrt, step});
    return loss_value;
  }
};

// kernel/train/peak_flops.cpp's CPU probe: best of 3 x 2 products of 1024 x 1024 fp32 matrices.
double measure_peak_flops() {
  at::NoGradGuard no_grad;
  const int64_t n = 1024;
  const at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  at::Tensor c = at::empty({n, n});
  at::mm_out(c, a, b);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = Clock::now();
    for (int i = 0; i < 2; ++i) at::mm_out(c, a, b);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 2 * 2.0 * n * n * n / seconds);
  }
  return best;
}

template <class Step>
void train(const Args& a, Gpt& model, const std::vector<Batch>& data, std::vector<double>& ms,
           std::vector<double>& losses) {
  Step stepper(a, model);
  for (int64_t step = 1; step <= a.steps; ++step) {
    const auto started = Clock::now();
    losses.push_back(stepper.run(data[size_t(step - 1)], step));
    ms.push_back(1e3 * std::chrono::duration<double>(Clock::now() - started).count());
  }
}

void print_array(const char* name, const std::vector<double>& xs) {
  std::printf("\"%s\": [", name);
  for (size_t i = 0; i < xs.size(); ++i) std::printf("%s%.17g", i ? ", " : "", xs[i]);
  std::printf("]");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    if (a.threads > 0) at::set_num_threads(a.threads);
    if (a.layout == "flat") loom::keep_freed_cpu_memory();
    const double peak = a.peak ? measure_peak_flops() : 0.0;
    const std::vector<Batch> data = synthetic_batches(a);
    Gpt model(a);
    std::vector<double> ms, losses;
    if (a.layout == "flat") train<FlatStep>(a, model, data, ms, losses);
    else train<PerParamStep>(a, model, data, ms, losses);
    int64_t numel = 0;
    for (const Param& p : model.params) numel += p.t.numel();
    std::printf("{\"variant\": \"%s\", \"threads\": %d, \"peak_flops\": %.6g, \"params\": %lld, "
                "\"flops_per_token\": %.17g, \"tokens_per_step\": %lld, ",
                a.layout.c_str(), at::get_num_threads(), peak, static_cast<long long>(numel),
                model.flops_per_token(), static_cast<long long>(a.B * a.T));
    print_array("step_ms", ms);
    std::printf(", ");
    print_array("loss", losses);
    std::printf("}\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom_bench_gpt_loop: %s\n", e.what());
    return 1;
  }
}
