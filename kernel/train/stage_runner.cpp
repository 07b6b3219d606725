#include "train/stage_runner.hpp"

#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include "base/failure.hpp"

namespace loom {

namespace {

constexpr int64_t kMostDims = 8;  // a hidden state's header: dtype, rank, then up to 8 sizes

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string layers_text(const StageLayers& s) {
  return s.count == 1 ? "layer " + std::to_string(s.first)
                      : "layers " + std::to_string(s.first) + ".." + std::to_string(s.first + s.count - 1);
}

}  // namespace

void check_pipeline_parallel(const DistributedSettings& d) {
  if (d.pipeline_parallel <= 1) {
    if (d.pipeline_chunks > 1)
      throw usage_failure("[distributed] pipeline_chunks = " + std::to_string(d.pipeline_chunks) +
                          " without pipeline_parallel > 1 means nothing; remove it or set pipeline_parallel");
    if (!d.pipeline_split_points.empty())
      throw usage_failure("[distributed] pipeline_split_points without pipeline_parallel > 1 means nothing; remove "
                          "it or set pipeline_parallel");
    return;
  }
  const std::string what = "[distributed] pipeline_parallel = " + std::to_string(d.pipeline_parallel);
  const auto refuse = [&](bool combined, const std::string& other, const std::string& why) {
    if (combined) throw usage_failure(what + " with " + other + " is not built (" + why + "); use one of them");
  };
  refuse(d.expert_parallel > 1, "expert_parallel > 1", "mixtures of experts are not cut into stages");
  refuse(d.shard == "parameters", "shard = \"parameters\"", "each stage would gather layers it does not run");
  refuse(d.sparse_tables == "row_sharded", "sparse_tables = \"row_sharded\"", "row-sharded tables are dlrm's");
  const StageSchedule schedule = stage_schedule_from_name(d.pipeline_schedule);
  if (schedule != StageSchedule::interleaved && d.pipeline_chunks != 1)
    throw usage_failure("[distributed] pipeline_chunks = " + std::to_string(d.pipeline_chunks) + " needs "
                        "pipeline_schedule = \"interleaved_1f1b\"; \"" + d.pipeline_schedule + "\" runs one chunk per "
                        "stage");
}

std::vector<StageLayers> cut_pipeline(const DistributedSettings& distributed, int64_t model_layers,
                                      const std::string& model) {
  const int ranks = static_cast<int>(distributed.pipeline_parallel), chunks = static_cast<int>(distributed.pipeline_chunks);
  const int stages = ranks * chunks;
  if (model_layers < stages)
    throw usage_failure("[distributed] pipeline_parallel = " + std::to_string(ranks) +
                        (chunks > 1 ? " x pipeline_chunks = " + std::to_string(chunks) : std::string()) + " = " +
                        std::to_string(stages) + " stages: model " + model + " has " + std::to_string(model_layers) +
                        (model_layers == 1 ? " layer" : " layers") + " for " + std::to_string(stages) +
                        " stages; each needs one at least: use fewer stages");
  return distributed.pipeline_split_points.empty()
             ? cut_layers_by_cost(static_cast<int>(model_layers), stages, distributed.pipeline_embedding_cost,
                                  distributed.pipeline_head_cost)
             : cut_layers_at(distributed.pipeline_split_points, static_cast<int>(model_layers), stages,
                             "[distributed] pipeline_split_points");
}

std::vector<int> stage_of_each_layer(const std::vector<StageLayers>& cut, int ranks) {
  std::vector<int> out;
  for (size_t stage = 0; stage < cut.size(); ++stage)
    for (int l = 0; l < cut[stage].count; ++l) out.push_back(static_cast<int>(stage) % ranks);
  return out;
}

StageRunner::StageRunner(Communicator& pipeline, const DistributedSettings& distributed, int64_t model_layers,
                         const std::string& model)
    : group_(pipeline),
      schedule_(stage_schedule_from_name(distributed.pipeline_schedule)),
      chunks_(static_cast<int>(distributed.pipeline_chunks)),
      cut_(cut_pipeline(distributed, model_layers, model)) {}

std::string StageRunner::describe() const {
  std::string out = "stage " + std::to_string(group_.rank()) + " of " + std::to_string(group_.world_size()) + " (" +
                    stage_schedule_name(schedule_) + "): ";
  for (int c = 0; c < chunks_; ++c)
    out += (c ? ", " : "") + layers_text(cut_[static_cast<size_t>(c * group_.world_size() + group_.rank())]);
  return out;
}

int StageRunner::tag(int micro_batch, int stage, bool backward, bool header) const {
  const int stages = group_.world_size() * chunks_;
  return ((micro_batch * stages + stage) * 2 + (backward ? 1 : 0)) * 2 + (header ? 1 : 0);
}

void StageRunner::send_hidden(const at::Tensor& hidden, int micro_batch, int stage) {
  if (hidden.dim() > kMostDims)
    throw runtime_failure("pipeline: a hidden state of " + std::to_string(hidden.dim()) + " dimensions; at most " +
                          std::to_string(kMostDims) + " travel between stages");
  at::Tensor header = at::zeros({2 + kMostDims}, at::kLong);
  header[0] = static_cast<int64_t>(hidden.scalar_type());
  header[1] = hidden.dim();
  for (int64_t d = 0; d < hidden.dim(); ++d) header[2 + d] = hidden.size(d);
  const int to = stage % group_.world_size();
  group_.start_send(header, to, tag(micro_batch, stage, false, true));
  group_.start_send(hidden.detach().contiguous(), to, tag(micro_batch, stage, false, false));
}

StageRunner::PassClock::PassClock(StageRunner& runner, const StagePass& pass)
    : runner(runner), pass(pass), waited_before(runner.waited_), started(Clock::now()) {}

StageRunner::PassClock::~PassClock() {
  const double computed = seconds_since(started) - (runner.waited_ - waited_before);
  (pass.forward ? runner.forward_seconds_ : runner.backward_seconds_)[static_cast<size_t>(pass.chunk)] += computed;
  ++runner.passes_;
}

StageRunner::Bubble StageRunner::take_bubble() {
  // One row: the waiting share, then each virtual stage's mean forward and backward pass; every
  // rank fills its own places and the sum gathers them.
  const int ranks = group_.world_size(), rank = group_.rank(), stages = ranks * chunks_;
  at::Tensor row = at::zeros({1 + 2 * stages}, at::kDouble);
  double* at_row = row.data_ptr<double>();
  at_row[0] = ran_ > 0 ? waited_ / ran_ : 0.0;
  const double per_stage_passes = static_cast<double>(passes_) / (2.0 * chunks_);  // each direction, each chunk
  for (int c = 0; c < chunks_ && passes_ > 0; ++c) {
    at_row[1 + c * ranks + rank] = forward_seconds_[static_cast<size_t>(c)] / per_stage_passes;
    at_row[1 + stages + c * ranks + rank] = backward_seconds_[static_cast<size_t>(c)] / per_stage_passes;
  }
  const int micro_batches = micro_batches_;
  waited_ = ran_ = 0;
  passes_ = 0;
  std::fill(forward_seconds_.begin(), forward_seconds_.end(), 0.0);
  std::fill(backward_seconds_.begin(), backward_seconds_.end(), 0.0);
  group_.allreduce_sum(row);
  Bubble out;
  out.measured = at_row[0] / ranks;
  if (micro_batches == 0) return out;
  StageCosts costs{std::vector<double>(at_row + 1, at_row + 1 + stages),
                   std::vector<double>(at_row + 1 + stages, at_row + 1 + 2 * stages)};
  out.expected = play_stage_passes(schedule_, {ranks, micro_batches, chunks_}, costs).bubble;
  return out;
}

at::Tensor StageRunner::receive_hidden(int micro_batch, int stage) {
  const int from = (stage - 1) % group_.world_size();
  at::Tensor header = at::zeros({2 + kMostDims}, at::kLong);
  const auto started = Clock::now();  // the header arrives when the stage before is done: waiting
  group_.receive(header, from, tag(micro_batch, stage, false, true));
  waited_ += seconds_since(started);
  const int64_t* h = header.data_ptr<int64_t>();
  if (h[1] < 0 || h[1] > kMostDims)  // the stages disagree on the message order: a bug, never data
    throw runtime_failure("pipeline: stage " + std::to_string(stage) + " received a header of " +
                          std::to_string(h[1]) + " dimensions for micro-batch " + std::to_string(micro_batch));
  std::vector<int64_t> shape(h + 2, h + 2 + h[1]);
  // The dtype as the sending stage's LibTorch numbered it: the same host build on every rank.
  const auto dtype = static_cast<at::ScalarType>(h[0]);
  at::Tensor hidden = at::empty(shape, at::TensorOptions().dtype(dtype).device(device_));
  group_.receive(hidden, from, tag(micro_batch, stage, false, false));
  return hidden;
}

std::vector<ForwardResult> StageRunner::run(const std::vector<Batch>& batches, double scale, const Forward& forward) {
  const int ranks = group_.world_size(), rank = group_.rank(), stages = ranks * chunks_;
  const PipelineShape shape{ranks, static_cast<int>(batches.size()), chunks_};
  struct Held {
    at::Tensor input;   // the hidden state received, a leaf whose gradient goes back (undefined on stage 0)
    at::Tensor output;  // the hidden state sent on, or the scaled loss on the last stage
  };
  std::map<std::pair<int, int>, Held> held;  // by (micro-batch, chunk), until its backward
  std::vector<ForwardResult> results(holds_loss() ? batches.size() : 0);
  const auto started = Clock::now();
  device_ = batches.front().inputs.device();
  forward_seconds_.resize(static_cast<size_t>(chunks_), 0.0);
  backward_seconds_.resize(static_cast<size_t>(chunks_), 0.0);
  micro_batches_ = shape.micro_batches;
  for (const StagePass& pass : stage_passes(schedule_, shape, rank)) {
    const int stage = pass.chunk * ranks + rank, m = pass.micro_batch;
    const StageLayers& layers = cut_[static_cast<size_t>(stage)];
    const PassClock clock{*this, pass};  // what the pass computed, its waiting left out
    if (pass.forward) {
      Held h;
      if (stage > 0) h.input = receive_hidden(m, stage).requires_grad_(true);
      ForwardResult out = forward(batches[static_cast<size_t>(m)], {layers.first, layers.first + layers.count, h.input});
      if (stage + 1 < stages) {
        h.output = out.hidden_out;
        send_hidden(h.output, m, stage + 1);
      } else {
        h.output = out.loss_sum.to(at::kFloat) * scale;
        results[static_cast<size_t>(m)] = std::move(out);
      }
      held[{m, pass.chunk}] = std::move(h);
      continue;
    }
    const auto it = held.find({m, pass.chunk});
    Held h = std::move(it->second);
    held.erase(it);
    if (stage + 1 < stages) {
      at::Tensor grad = at::empty_like(h.output, at::MemoryFormat::Contiguous);
      const auto waiting = Clock::now();
      group_.receive(grad, (stage + 1) % ranks, tag(m, stage, true, false));
      waited_ += seconds_since(waiting);
      torch::autograd::backward({h.output}, {grad});
    } else {
      h.output.backward();
    }
    if (stage > 0) {
      if (!h.input.grad().defined())
        throw runtime_failure("pipeline: " + layers_text(layers) + " gave no gradient for the hidden state "
                              "they received; the model must compute them from it");
      group_.start_send(h.input.grad(), (stage - 1) % ranks, tag(m, stage - 1, true, false));
    }
  }
  group_.wait_sends();
  // Every stage ends the step together (the gradient sum after it would wait the same): a stage
  // done early sits out the others' last passes, which is its share of the bubble too. The steps
  // start together already (the token count's all-reduce), so each stage measures one span.
  const auto finishing = Clock::now();
  at::Tensor done = at::zeros({1}, at::kLong);
  group_.allreduce_sum(done);
  waited_ += seconds_since(finishing);
  ran_ += seconds_since(started);
  return results;
}

ForwardResult StageRunner::forward_only(const Batch& batch, const Forward& forward) {
  const int ranks = group_.world_size(), rank = group_.rank(), stages = ranks * chunks_;
  const double waited_before = waited_;  // evaluation's waiting is not the training step's bubble
  device_ = batch.inputs.device();
  ForwardResult last;
  for (int c = 0; c < chunks_; ++c) {  // a rank's virtual stages in the order the batch reaches them
    const int stage = c * ranks + rank;
    const StageLayers& layers = cut_[static_cast<size_t>(stage)];
    at::Tensor hidden;
    if (stage > 0) hidden = receive_hidden(0, stage);
    ForwardResult out = forward(batch, {layers.first, layers.first + layers.count, hidden});
    if (stage + 1 < stages) send_hidden(out.hidden_out, 0, stage + 1);
    else last = std::move(out);
  }
  group_.wait_sends();
  waited_ = waited_before;
  return last;
}

}  // namespace loom
