// micro_batch_graphs.hpp: run.cuda_graph (#51). A micro-batch's forward and backward captured
// once as a CUDA graph and replayed on every later step, so the host launches one graph where it
// launched thousands of kernels (6,262 a step on the Qwen3-0.6B shape), and the GPU never waits
// for the host between them.
//
// Two positions in a step differ: its first micro-batch writes the gradient slots over
// (train/gradient_writes.hpp), the later ones add to them; each has its own graph. A position's
// first micro-batch runs on a side stream without capture (the warm-up PyTorch's CUDA graph
// notes ask for: lazy initialisation, the model's one scan of the token ids), the second is
// captured there and replayed, the rest are replayed. Both graphs share one memory pool, and the
// batch is copied into the tensors the graph reads. What stays outside: the all-reduce of
// several ranks (refused at set-up: one process only), clipping, the update, the schedule,
// hooks and logging, which are few launches on the flat buffers.
//
// Nothing here decides a number differently from the eager step: the loss's scale is a device
// scalar the step fills (the same fp32 product as the eager step's scalar), and the graph runs
// the kernels the capture saw. What the capture cannot take makes the steps run eagerly from
// then on, after one warning naming why: batches with fields (packed or variable rows), a new
// batch shape, a model reporting its own units or metrics, or an op that waits for the device
// (MoE routing reads its counts on the host).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "abi/compute_components.hpp"

namespace loom {

class GradientWrites;

class MicroBatchGraphs {
 public:
  // One micro-batch's forward, then the backward of its loss times scale (a 0-dim fp32 tensor
  // on the device). Returns the model's result with loss_sum in fp32, detached.
  using Pass = std::function<ForwardResult(const Batch& batch, const at::Tensor& scale)>;

  // Why a run on this device with this many processes cannot capture its micro-batches ("" when
  // it can). sparse_tables: the model has sparse embedding tables, whose rows are collected on
  // the host after the backward.
  static std::string refusal(const at::Device& device, int64_t processes, bool sparse_tables);

  // device: a CUDA device refusal() accepted. writes: the step's gradient writes, whose record of
  // the slots written a replay sets as its capture left it.
  MicroBatchGraphs(const at::Device& device, GradientWrites& writes);
  ~MicroBatchGraphs();
  MicroBatchGraphs(const MicroBatchGraphs&) = delete;
  MicroBatchGraphs& operator=(const MicroBatchGraphs&) = delete;

  // Micro-batch `index` of step `step`, whose loss weighs `scale`: warmed up, captured and
  // replayed, or std::nullopt when the caller must run it eagerly (the graphs gave up, with one
  // warning). The result's loss_sum is the graph's output: read it before the next replay.
  std::optional<ForwardResult> run(const Batch& batch, double scale, size_t index, int64_t step, const Pass& pass);

  // Weights or RNG state were written from a checkpoint: drop the graphs; the next steps warm
  // up and capture again.
  void reset();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace loom
