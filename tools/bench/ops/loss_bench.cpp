// loss_bench.cpp: the output layer and the token loss, forward and backward, two ways: the
// whole (N, V) logits through at::cross_entropy_loss (what gpt and llama did before issue 34)
// and loom_ops::chunked_linear_cross_entropy (ops/chunked_loss/). One way per process, so that each peak RSS
// (getrusage) is that way's own; tools/bench/README "The output layer's loss" runs both.
//
// usage: loom_bench_loss whole|chunked [--rows 4096] [--width 768] [--vocab 50304] [--reps 5]
//                        [--chunk-rows N] (default: loom_ops::loss_chunk_rows on the CPU)
// Prints one JSON object: the way, the median ms of forward + backward, the peak RSS in MiB.
#include <ATen/ATen.h>
#include <loom_ops/chunked_loss.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "whole") != 0 && std::strcmp(argv[1], "chunked") != 0)) {
    std::fprintf(stderr, "usage: loom_bench_loss whole|chunked [--rows N] [--width C] [--vocab V] [--reps R] [--chunk-rows N]\n");
    return 2;
  }
  const bool chunked = std::strcmp(argv[1], "chunked") == 0;
  int64_t rows = 4096, width = 768, vocab = 50304, reps = 5, chunk_rows = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const int64_t value = std::stoll(argv[i + 1]);
    if (key == "--rows") rows = value;
    else if (key == "--width") width = value;
    else if (key == "--vocab") vocab = value;
    else if (key == "--reps") reps = value;
    else if (key == "--chunk-rows") chunk_rows = value;
    else { std::fprintf(stderr, "unknown option %s\n", key.c_str()); return 2; }
  }
  if (chunk_rows <= 0) chunk_rows = loom_ops::loss_chunk_rows(vocab, at::kCPU);
  at::manual_seed(0);
  const at::Tensor hidden = at::randn({rows, width}).requires_grad_(true);
  const at::Tensor weight = (at::randn({vocab, width}) * 0.02).requires_grad_(true);
  const at::Tensor targets = at::randint(0, vocab, {rows}, at::kLong);
  std::vector<double> ms;
  for (int64_t r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const at::Tensor loss =
        chunked ? loom_ops::chunked_linear_cross_entropy(hidden, weight, targets, -100, chunk_rows)
                : at::cross_entropy_loss(at::mm(hidden, weight.t()), targets, {}, at::Reduction::Sum, -100);
    torch::autograd::grad({loss}, {hidden, weight});
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("{\"way\": \"%s\", \"rows\": %lld, \"width\": %lld, \"vocab\": %lld, \"chunk_rows\": %lld, \"ms\": %.1f, "
              "\"peak_rss_mib\": %.0f}\n",
              argv[1], static_cast<long long>(rows), static_cast<long long>(width), static_cast<long long>(vocab),
              static_cast<long long>(chunk_rows),
              ms[ms.size() / 2], static_cast<double>(usage.ru_maxrss) / 1024.0);
  return 0;
}
