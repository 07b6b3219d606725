// moe_grouped_bench.cpp: the experts' matrix products of a mixture of experts, three ways, on
// the same rows sorted by expert:
//   grouped     loom_ops::grouped_linear (ops/grouped_linear/): one at::_grouped_mm over
//               all experts (its fp32 path);
//   narrow      one at::linear per expert on its narrow() of the rows, concatenated: what
//               grouped_linear does for the dtypes _grouped_mm does not take. narrow's backward
//               writes each expert's input gradient into a zero tensor of ALL the rows, so
//               backward costs experts x rows x in more memory traffic;
//   split       the same loop on at::split_with_sizes of the rows (one concatenation backward);
//   stacked     at::_grouped_mm alone on weights already stacked as one (E, in, out) leaf: what
//               grouped_linear costs without its at::stack of the E weights each call (their
//               gradient is then the stacked one; the host keeps every expert's weight apart).
// Forward alone and forward + backward (the gradients of the rows and of every expert's weight,
// through torch::autograd::grad with a fixed random output gradient). tools/bench/moe_bench
// builds and runs it; tools/bench/README "Mixture of experts" has its numbers.
//
// usage: loom_bench_moe_grouped [--experts 8,32,64] [--rows 8192] [--in 256,1024] [--out 512]
//                               [--reps 7] [--threads 1] [--seed 0] [--host-malloc 1]
// --host-malloc 1 (the default) tunes glibc malloc as `host run` does by default
// (kernel/train/cpu_memory.cpp, run.cpu_memory_cache): freed blocks under 32 MiB are reused
// from the heap; larger ones are still fresh mmaps, page-faulted in on every call. 0: glibc's
// own defaults.
// Rows are (token, expert) pairs: each pair's expert is drawn uniformly, so every expert gets
// about rows / experts rows, as a balanced router gives. One warm-up of each way, then --reps
// repetitions, the ways in turn (reversed every other repetition); prints one JSON object per
// shape: the median ms of each way, forward and forward + backward, and the ratios way / grouped
// (above 1: grouped is faster).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <loom_ops/grouped_linear.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "train/cpu_memory.hpp"

namespace {

std::vector<int64_t> list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

at::Tensor per_expert(const at::Tensor& rows, const std::vector<at::Tensor>& weights, const std::vector<int64_t>& counts) {
  std::vector<at::Tensor> out;
  int64_t start = 0;
  for (size_t e = 0; e < weights.size(); ++e) {
    out.push_back(at::linear(rows.narrow(0, start, counts[e]), weights[e]));
    start += counts[e];
  }
  return at::cat(out);
}

at::Tensor per_expert_split(const at::Tensor& rows, const std::vector<at::Tensor>& weights,
                            const std::vector<int64_t>& counts) {
  const std::vector<at::Tensor> parts = at::split_with_sizes(rows, counts);
  std::vector<at::Tensor> out;
  for (size_t e = 0; e < weights.size(); ++e) out.push_back(at::linear(parts[e], weights[e]));
  return at::cat(out);
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

double time_ms(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> experts_list{8, 32, 64}, in_list{256, 1024};
  int64_t rows = 8192, out_features = 512, reps = 7, threads = 1, seed = 0, host_malloc = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--experts") experts_list = list(value);
    else if (key == "--in") in_list = list(value);
    else if (key == "--rows") rows = std::stoll(value);
    else if (key == "--out") out_features = std::stoll(value);
    else if (key == "--reps") reps = std::stoll(value);
    else if (key == "--threads") threads = std::stoll(value);
    else if (key == "--seed") seed = std::stoll(value);
    else if (key == "--host-malloc") host_malloc = std::stoll(value);
    else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      return 2;
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr,
                 "usage: loom_bench_moe_grouped [--experts 8,32,64] [--rows 8192] [--in 256,1024] [--out 512] "
                 "[--reps 7] [--threads 1] [--seed 0] [--host-malloc 1]\n");
    return 2;
  }
  if (host_malloc) loom::keep_freed_cpu_memory();
  at::set_num_threads(static_cast<int>(threads));
  for (const int64_t E : experts_list)
    for (const int64_t in : in_list) {
      at::manual_seed(seed);
      const at::Tensor expert_of_row = std::get<0>(at::randint(0, E, {rows}, at::kLong).sort());
      const at::Tensor counts = at::bincount(expert_of_row, {}, E);
      const at::Tensor counts_cpu = counts.contiguous();
      std::vector<int64_t> counts_vec(counts_cpu.data_ptr<int64_t>(), counts_cpu.data_ptr<int64_t>() + E);
      const at::Tensor x = at::randn({rows, in}).requires_grad_(true);
      std::vector<at::Tensor> weights;
      for (int64_t e = 0; e < E; ++e)
        weights.push_back((at::randn({out_features, in}) / std::sqrt(static_cast<double>(in))).requires_grad_(true));
      const at::Tensor grad_out = at::randn({rows, out_features});
      std::vector<at::Tensor> inputs{x};
      inputs.insert(inputs.end(), weights.begin(), weights.end());

      const at::Tensor stacked_weights = at::stack(weights).transpose(1, 2).detach().requires_grad_(true);
      const at::Tensor ends = counts.cumsum(0).to(at::kInt);
      std::vector<at::Tensor> stacked_inputs{x, stacked_weights};
      const auto grouped = [&] { return loom_ops::grouped_linear(x, weights, counts); };
      const auto stacked = [&] { return at::_grouped_mm(x, stacked_weights, ends); };
      const auto narrowed = [&] { return per_expert(x, weights, counts_vec); };
      const auto split = [&] { return per_expert_split(x, weights, counts_vec); };
      const auto forward = [](const std::function<at::Tensor()>& f) {
        return std::function<void()>([f] {
          at::NoGradGuard no_grad;
          (void)f();
        });
      };
      const auto both = [&](const std::function<at::Tensor()>& f, const std::vector<at::Tensor>& wrt) {
        return std::function<void()>([f, &wrt, &grad_out] {
          const at::Tensor y = f();
          (void)torch::autograd::grad({y}, wrt, {grad_out});
        });
      };
      // The ways agree (a sanity check, printed; not a pass/fail).
      double max_diff = 0;
      {
        at::NoGradGuard no_grad;
        const at::Tensor g = grouped();
        max_diff = std::max({(g - narrowed()).abs().max().item<double>(), (g - split()).abs().max().item<double>(),
                             (g - stacked()).abs().max().item<double>()});
      }
      constexpr size_t W = 4;  // ways
      const char* names[] = {"forward_grouped", "forward_narrow", "forward_split", "forward_stacked",
                             "fwd_bwd_grouped", "fwd_bwd_narrow", "fwd_bwd_split", "fwd_bwd_stacked"};
      std::vector<std::function<void()>> ways{
          forward(grouped),       forward(narrowed),       forward(split),       forward(stacked),
          both(grouped, inputs), both(narrowed, inputs), both(split, inputs), both(stacked, stacked_inputs)};
      std::vector<std::vector<double>> ms(ways.size());
      for (auto& w : ways) w();  // warm-up
      for (int64_t r = 0; r < reps; ++r)
        for (size_t i = 0; i < ways.size(); ++i) {
          const size_t j = r % 2 ? ways.size() - 1 - i : i;
          ms[j].push_back(time_ms(ways[j]));
        }
      std::vector<double> med;
      for (const auto& m : ms) med.push_back(median(m));
      const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(in) * static_cast<double>(out_features);
      std::printf("{\"experts\": %lld, \"rows\": %lld, \"in\": %lld, \"out\": %lld, \"threads\": %lld, \"reps\": %lld, "
                  "\"host_malloc\": %s, "
                  "\"rows_per_expert_min\": %lld, \"rows_per_expert_max\": %lld, \"max_abs_diff\": %.3g",
                  static_cast<long long>(E), static_cast<long long>(rows), static_cast<long long>(in),
                  static_cast<long long>(out_features), static_cast<long long>(threads), static_cast<long long>(reps),
                  host_malloc ? "true" : "false", static_cast<long long>(*std::min_element(counts_vec.begin(), counts_vec.end())),
                  static_cast<long long>(*std::max_element(counts_vec.begin(), counts_vec.end())), max_diff);
      for (size_t i = 0; i < ms.size(); ++i) std::printf(", \"%s_ms\": %.3f", names[i], med[i]);
      for (size_t i = 0; i < ms.size(); ++i)
        if (i % W) std::printf(", \"%s_over_grouped\": %.3f", names[i], med[i] / med[i - i % W]);
      for (size_t i = W; i < ms.size(); ++i) std::printf(", \"%s_gflops\": %.2f", names[i], 3 * flops / med[i] / 1e6);
      std::printf(", \"samples_ms\": {");
      for (size_t i = 0; i < ms.size(); ++i) {
        std::printf("%s\"%s\": [", i ? ", " : "", names[i]);
        for (size_t k = 0; k < ms[i].size(); ++k) std::printf(k ? ", %.3f" : "%.3f", ms[i][k]);
        std::printf("]");
      }
      std::printf("}}\n");
      std::fflush(stdout);
    }
  return 0;
}
