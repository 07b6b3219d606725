#include "train/grad_sync.hpp"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include "base/failure.hpp"
#include "train/cpu_memory.hpp"
#include "train/mapped_cuda_memory.hpp"

namespace loom {
namespace {

// Runs after the accumulator has added this micro-batch's gradient into the flat buffer.
struct ReadyHook final : torch::autograd::FunctionPostHook {
  std::function<void()> ready;
  explicit ReadyHook(std::function<void()> f) : ready(std::move(f)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    ready();
    return outputs;
  }
};

}  // namespace

std::shared_ptr<const void> on_gradient_accumulated(const ModelParam& param, std::function<void()> ready) {
  auto accumulator = torch::autograd::impl::grad_accumulator(*param.tensor);
  if (!accumulator) throw runtime_failure("parameter \"" + param.name + "\" has no gradient accumulator");
  accumulator->add_post_hook(std::make_unique<ReadyHook>(std::move(ready)));
  return std::make_shared<decltype(accumulator)>(std::move(accumulator));  // whichever pointer type it is
}

std::vector<std::vector<size_t>> pieces_of_gradients(const std::vector<ModelParam>& params,
                                                     const std::vector<at::Tensor>& pieces,
                                                     std::vector<size_t>& per_piece) {
  per_piece.assign(pieces.size(), 0);
  std::vector<std::vector<size_t>> out;
  for (const ModelParam& param : params) {
    const at::Tensor& grad = param.tensor->grad();
    const char* begin = static_cast<const char*>(grad.data_ptr());
    const char* end = begin + grad.nbytes();
    std::vector<size_t> touched;
    for (size_t k = 0; k < pieces.size(); ++k) {
      const char* piece_begin = static_cast<const char*>(pieces[k].data_ptr());
      if (begin < piece_begin + pieces[k].nbytes() && piece_begin < end) touched.push_back(k), ++per_piece[k];
    }
    out.push_back(std::move(touched));
  }
  return out;
}

GradientSync::GradientSync(const std::vector<ModelParam>& params, FlatParams& flat, Communicator& comm,
                           int64_t bucket_bytes, Communicator* placed_group, Communicator* placed_replicas)
    : comm_(comm),
      placed_group_(placed_group),
      placed_replicas_(placed_replicas),
      flat_(flat),
      buckets_(flat.grad_buckets(bucket_bytes)) {
  const std::vector<bool> sharded = flat.sharded_groups(), placed = flat.placed_groups();
  for (size_t g = 0; g < sharded.size(); ++g) placed_cut_ = placed_cut_ || (sharded[g] && placed[g]);
  std::vector<at::Tensor> bucket_grads;
  for (const auto& b : buckets_) bucket_grads.push_back(b.grads);
  param_buckets_ = pieces_of_gradients(params, bucket_grads, bucket_size_);
  for (size_t i = 0; i < params.size(); ++i)
    accumulators_.push_back(on_gradient_accumulated(params[i], [this, i] { on_gradient_ready(i); }));
  missing_ = bucket_size_;
  started_.assign(buckets_.size(), false);
}

GradientSync::~GradientSync() = default;

void GradientSync::arm() {
  armed_ = true;
  missing_ = bucket_size_;
  started_.assign(buckets_.size(), false);
  started_early_ = 0;
  next_ = 0;
}

void GradientSync::on_gradient_ready(size_t param_index) {
  if (!armed_) return;  // micro-batches before the last accumulate locally
  for (size_t b : param_buckets_[param_index]) --missing_[b];
  // Buckets start in their order only: every rank must issue its collectives in the same order,
  // and the order in which parameters get their gradients may differ between ranks (under
  // expert parallelism each computes other experts, and some get none on a rank).
  while (next_ < buckets_.size() && missing_[next_] == 0) {
    start(next_++);
    ++started_early_;
  }
}

double GradientSync::finish() {
  armed_ = false;
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!started_[b]) start(b);
  while (!reducing_.empty()) retire_oldest_reduce();
  comm_.wait_all();
  if (placed_group_ && placed_replicas_) placed_replicas_->wait_all();
  // Ready for the next step, armed or not (a pipeline stage never arms: its backward passes
  // interleave with its forwards, and only its own layers get gradients).
  started_.assign(buckets_.size(), false);
  return buckets_.empty() ? 0.0 : static_cast<double>(started_early_) / static_cast<double>(buckets_.size());
}

Communicator* GradientSync::summed_over(bool placed) { return placed && placed_group_ ? placed_replicas_ : &comm_; }

void GradientSync::start(size_t bucket) {
  started_[bucket] = true;
  FlatParams::GradBucket& b = buckets_[bucket];
  acquire_mapped(b.grads);  // CUDA, shard = "parameters": slots no gradient reached, given back last step
  Communicator* over = summed_over(b.placed);
  if (!over) return;  // nobody else holds it
  if (b.owner < 0 || !flat_.reduces_to_owner()) {
    over->start_allreduce(b.grads);
    return;
  }
  reducing_.push_back({bucket, over, over->start_reduce(b.grads, b.owner)});
  while (reducing_.size() > kReducesInFlight) retire_oldest_reduce();
}

void GradientSync::retire_oldest_reduce() {
  const Reducing r = reducing_.front();
  reducing_.pop_front();
  r.over->wait_ticket(r.ticket);
  // Another rank owns the sum: this rank's copy goes back, and reads as zeros next step.
  if (buckets_[r.bucket].owner != r.over->rank()) release_memory(buckets_[r.bucket].grads, /*zeroed=*/true);
}

void GradientSync::gather_params() {
  // "parameters" gathers each unit when it runs next (train/parameter_shards.hpp).
  if (!flat_.sharded() || flat_.shard().mode == ShardMode::parameters) return;
  std::vector<at::Tensor> buffers = flat_.param_buffers();
  const std::vector<bool> sharded = flat_.sharded_groups(), placed = flat_.placed_groups();
  for (size_t g = 0; g < buffers.size(); ++g) {
    if (!sharded[g]) continue;
    if (Communicator* over = summed_over(placed[g])) over->allgather_chunks(buffers[g]);
  }
}

at::Tensor GradientSync::square_sums(const std::set<std::string>& named) {
  const auto sums = [&](std::optional<bool> placed) {
    return at::stack({flat_.owned_grad_square_sum(placed), flat_.owned_grad_square_sum(named, placed)});
  };
  if (!placed_group_) {
    at::Tensor all = sums(std::nullopt);
    if (flat_.reduces_to_owner()) comm_.allreduce_sum(all);  // each rank holds the sum of its slices only
    return all;
  }
  // Each rank of the placed group holds other experts or layers: their squares add up.
  at::Tensor dense = sums(false);
  if (flat_.reduces_to_owner()) comm_.allreduce_sum(dense);
  at::Tensor placed = sums(true);
  // Cut among a stage's replicas, each holds the reduced sum of its slice only (experts' stay whole).
  if (flat_.reduces_to_owner() && placed_cut_ && placed_replicas_) placed_replicas_->allreduce_sum(placed);
  placed_group_->allreduce_sum(placed);
  return dense + placed.to(dense.device());
}

at::Tensor GradientSync::grad_norm() {
  if (!placed_group_ && !flat_.reduces_to_owner()) return flat_.grad_norm();
  return square_sums({})[0].sqrt().to(at::kFloat);
}

}  // namespace loom
