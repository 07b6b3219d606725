#include "train/micro_batch_graphs.hpp"

#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

#include "base/failure.hpp"
#include "train/gradient_writes.hpp"

#ifdef LOOM_WITH_CUDA
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace loom {

std::string MicroBatchGraphs::refusal(const at::Device& device, int64_t processes, bool sparse_tables) {
  if (!device.is_cuda()) return "it has no effect on the CPU";
#ifndef LOOM_WITH_CUDA
  (void)processes;
  (void)sparse_tables;
  return "this host was built without the CUDA toolkit (LOOM_WITH_CUDA unset)";
#else
  if (processes > 1)
    return "it captures runs of one process, and this one has " + std::to_string(processes) +
           " (their all-reduce, gathers and sends run between a micro-batch's passes)";
  if (sparse_tables) return "the model's sparse embedding tables collect the rows they touched on the host";
  return "";
#endif
}

#ifdef LOOM_WITH_CUDA

namespace {

// The first line of an error, for the one warning a fallback prints (LibTorch appends traces).
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string shape_of(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "] " + std::string(c10::toString(t.scalar_type()));
}

// Everything queued on `earlier` so far comes before what is queued on `later` from now on.
void order_after(const c10::cuda::CUDAStream& later, const c10::cuda::CUDAStream& earlier) {
  at::cuda::CUDAEvent done;
  done.record(earlier);
  done.block(later);
}

}  // namespace

struct MicroBatchGraphs::State {
  struct Position {
    enum class Stage { unseen, warmed, captured } stage = Stage::unseen;
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    at::Tensor inputs, targets;  // what the graph reads; each replay's batch is copied in
    ForwardResult out;           // what it writes: the loss
    std::vector<bool> written;   // the gradient slots written once it has run
  };

  State(const at::Device& d, GradientWrites& w)
      : device(d), writes(w), side(c10::cuda::getStreamFromPool(false, d.index())),
        scale(at::zeros({}, at::TensorOptions().device(d).dtype(at::kFloat))) {}

  c10::cuda::CUDAStream current() const { return c10::cuda::getCurrentCUDAStream(device.index()); }

  // The pass on the side stream, after everything queued so far and before what follows.
  ForwardResult warm_up(Position& p, const Batch& batch, const MicroBatchGraphs::Pass& pass) {
    const c10::cuda::CUDAStream main = current();
    order_after(side, main);
    ForwardResult out;
    {
      const c10::cuda::CUDAStreamGuard on_side(side);
      out = pass(batch, scale);
    }
    order_after(main, side);
    p.stage = Position::Stage::warmed;
    return out;
  }

  // Captures the pass on the side stream; "" on success, else why it failed (the gradient
  // slots' record is set back: nothing the capture saw has run).
  std::string capture(Position& p, const Batch& batch, const MicroBatchGraphs::Pass& pass) {
    p.inputs = batch.inputs.clone();
    p.targets = batch.targets.clone();
    Batch in;
    in.inputs = p.inputs;
    in.targets = p.targets;
    in.tokens = batch.tokens;
    const std::vector<bool> before = writes.written_slots();
    // The warm-up's freed blocks go back before the graph's pool takes its own (torch.cuda.graph
    // does the same); a graph captured earlier keeps its pool, which this one shares.
    c10::cuda::CUDACachingAllocator::emptyCache();
    if (pool.first == 0 && pool.second == 0) pool = at::cuda::graph_pool_handle();
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    const c10::cuda::CUDAStream main = current();
    order_after(side, main);
    bool begun = false;
    try {
      const c10::cuda::CUDAStreamGuard on_side(side);
      // Thread-local: the prefetcher's thread keeps pinning and copying batches meanwhile.
      graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
      begun = true;
      p.out = pass(in, scale);
      graph->capture_end();
    } catch (const std::exception& e) {
      abandon(begun);
      writes.set_written(before);
      p = Position{};
      return first_line(e.what());
    }
    order_after(main, side);
    p.written = writes.written_slots();
    p.graph = std::move(graph);
    p.stage = Position::Stage::captured;
    return "";
  }

  // A capture that threw: end it on the stream if it still runs, and give the pool's share back
  // (CUDAGraph's own clean-up only does that after a capture that ended).
  void abandon(bool begun) {
    if (!begun) return;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(side.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(side.stream(), &partial) == cudaSuccess && partial) cudaGraphDestroy(partial);
    }
    (void)cudaGetLastError();  // capture errors are not sticky; clear the last one
    try {
      c10::cuda::CUDACachingAllocator::endAllocateToPool(device.index(), pool);
      c10::cuda::CUDACachingAllocator::releasePool(device.index(), pool);
    } catch (const std::exception&) {  // no longer recording to the pool: capture_end got that far
    }
    try {
      at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(pool);
      at::getHostAllocator(at::kCUDA)->release_pool(pool);
    } catch (const std::exception&) {
    }
  }

  ForwardResult replay(Position& p, const Batch& batch) {
    p.inputs.copy_(batch.inputs, /*non_blocking=*/true);
    p.targets.copy_(batch.targets, /*non_blocking=*/true);
    p.graph->replay();
    writes.set_written(p.written);
    return p.out;
  }

  void drop_graphs() {
    // A replay may still run: its graph and pool go only once the stream is past it.
    if (positions[0].graph || positions[1].graph) current().synchronize();
    for (Position& p : positions) p = Position{};
  }

  const at::Device device;
  GradientWrites& writes;
  const c10::cuda::CUDAStream side;  // warm-ups and captures; replays run on the current stream
  const at::Tensor scale;            // the micro-batch's loss weight, filled before each pass
  c10::MempoolId_t pool{0, 0};       // both positions' graphs allocate here
  Position positions[2];             // the step's first micro-batch, and the later ones
  std::string gave_up;               // why the steps run eagerly now ("" while graphs are used)
};

MicroBatchGraphs::MicroBatchGraphs(const at::Device& device, GradientWrites& writes)
    : state_(std::make_unique<State>(device, writes)) {}

MicroBatchGraphs::~MicroBatchGraphs() {
  try {
    state_->drop_graphs();
  } catch (const std::exception&) {  // on the way out after a device error: nothing left to order
  }
}

std::optional<ForwardResult> MicroBatchGraphs::run(const Batch& batch, double scale, size_t index, int64_t step,
                                                  const Pass& pass) {
  State& s = *state_;
  if (!s.gave_up.empty()) return std::nullopt;
  State::Position& p = s.positions[index == 0 ? 0 : 1];
  std::string why;
  if (!batch.fields.empty())
    why = "the data's batches carry fields (packed or variable rows), which a graph cannot take";
  else if (p.stage == State::Position::Stage::captured &&
           (!batch.inputs.sizes().equals(p.inputs.sizes()) || batch.inputs.scalar_type() != p.inputs.scalar_type() ||
            !batch.targets.sizes().equals(p.targets.sizes())))
    why = "a batch of " + shape_of(batch.inputs) + " where the graph was captured with " + shape_of(p.inputs);
  if (why.empty()) {
    s.scale.fill_(scale);
    switch (p.stage) {
      case State::Position::Stage::unseen: {
        ForwardResult out = s.warm_up(p, batch, pass);
        if (out.units.defined() || !out.metrics.empty()) {
          why = "model reports its own loss units or metrics, which the step sums outside the graph";
          s.drop_graphs();
          s.gave_up = why;
          spdlog::warn("run.cuda_graph: the steps run without graphs from step {}: the {}", step + 1, why);
        }
        return out;
      }
      case State::Position::Stage::warmed:
        why = s.capture(p, batch, pass);
        if (!why.empty()) {
          why = "the capture failed (" + why + ")";
          break;
        }
        spdlog::info("run.cuda_graph: captured the {} micro-batch's forward and backward at step {}; later steps "
                     "replay it",
                     index == 0 ? "first" : "later", step);
        return s.replay(p, batch);
      case State::Position::Stage::captured:
        return s.replay(p, batch);
    }
  }
  s.drop_graphs();
  s.gave_up = why;
  spdlog::warn("run.cuda_graph: the steps run without graphs from step {}: {}", step, why);
  return std::nullopt;
}

void MicroBatchGraphs::reset() { state_->drop_graphs(); }

#else  // built without the CUDA toolkit: refusal() never lets a run get here

struct MicroBatchGraphs::State {};

MicroBatchGraphs::MicroBatchGraphs(const at::Device&, GradientWrites&) {
  throw runtime_failure("run.cuda_graph: this host was built without the CUDA toolkit");
}
MicroBatchGraphs::~MicroBatchGraphs() = default;
std::optional<ForwardResult> MicroBatchGraphs::run(const Batch&, double, size_t, int64_t, const Pass&) {
  return std::nullopt;
}
void MicroBatchGraphs::reset() {}

#endif

}  // namespace loom
