#include "train/optimizer_offload.hpp"

#include "train/grad_sync.hpp"  // on_gradient_accumulated

#include <loom/torch.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

#ifdef LOOM_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace loom {

// The copies of one step, in the order step() issues them. On the CPU each copy is done when
// issued. On CUDA the copies to the host queue on one side stream and those back on another
// (a PCIe link carries both directions at once), both behind the compute queued before the
// step; an event after each piece's copies tells the CPU that piece has arrived, and the
// compute stream waits for the last copy back before the next forward.
class OptimizerOffload::Copies {
 public:
  Copies(const at::Device& device, size_t pieces) : cuda_(device.is_cuda()) {
#ifdef LOOM_WITH_CUDA
    if (cuda_) side_ = std::make_unique<Side>(device, pieces);
#else
    (void)pieces;
#endif
  }
  // The copies issued next wait for the compute queued so far on the calling thread's stream
  // (the step's; during the backward, the stream autograd accumulated the gradient on).
  void after_compute(bool both_ways) {
#ifdef LOOM_WITH_CUDA
    if (!cuda_) return;
    side_->ready.record(c10::cuda::getCurrentCUDAStream(side_->device.index()));
    side_->ready.block(side_->to_host);
    if (both_ways) side_->ready.block(side_->to_device);
#else
    (void)both_ways;
#endif
  }
  void to_host(at::Tensor host, const at::Tensor& device) { copy(host, device, /*back=*/false); }
  void mark_arrived(size_t piece) {
#ifdef LOOM_WITH_CUDA
    if (cuda_) side_->arrived[piece].record(side_->to_host);
#else
    (void)piece;
#endif
  }
  void wait_arrived(size_t piece) {
#ifdef LOOM_WITH_CUDA
    if (cuda_) side_->arrived[piece].synchronize();
#else
    (void)piece;
#endif
  }
  void to_device(at::Tensor device, const at::Tensor& host) { copy(device, host, /*back=*/true); }
  void end() {
#ifdef LOOM_WITH_CUDA
    if (!cuda_) return;
    side_->returned.record(side_->to_device);
    side_->returned.block(c10::cuda::getCurrentCUDAStream(side_->device.index()));
#endif
  }

 private:
  void copy(at::Tensor& to, const at::Tensor& from, bool back) {
#ifdef LOOM_WITH_CUDA
    if (cuda_) {
      const c10::cuda::CUDAStreamGuard on(back ? side_->to_device : side_->to_host);
      to.copy_(from, /*non_blocking=*/true);  // pinned host memory: a DMA on that stream
      return;
    }
#else
    (void)back;
#endif
    to.copy_(from);
  }

  bool cuda_;
#ifdef LOOM_WITH_CUDA
  struct Side {
    Side(const at::Device& d, size_t pieces)
        : device(d),
          to_host(c10::cuda::getStreamFromPool(false, d.index())),
          to_device(c10::cuda::getStreamFromPool(false, d.index())),
          arrived(pieces) {}
    at::Device device;
    c10::cuda::CUDAStream to_host, to_device;
    at::cuda::CUDAEvent ready, returned;
    std::vector<at::cuda::CUDAEvent> arrived;  // one per piece, recorded again each step
  };
  std::unique_ptr<Side> side_;
#endif
};

OptimizerOffload::OptimizerOffload(const FlatParams& flat, int64_t piece_bytes,
                                   const std::vector<ModelParam>& early_from) {
  const loom_param_groups& view = flat.abi();
  at::Device device = at::kCPU;
  for (size_t i = 0; i < view.group_count; ++i) {
    const loom_param_group& from = *view.groups[i];
    auto g = std::make_unique<Group>();
    g->device_params = tensor(from.params);
    g->device_grads = tensor(from.grads);
    device = g->device_params.device();
    // Pinned on CUDA: the copies run as DMA, and neither direction waits for the host.
    const auto host = g->device_params.options().device(at::kCPU).pinned_memory(g->device_params.is_cuda());
    g->params = at::empty_like(g->device_params, host);
    g->grads = at::empty_like(g->device_grads, host);
    g->abi = from;  // the same segment table: offsets are into the slice, which the copy keeps
    g->abi.params = handle(g->params);
    g->abi.grads = handle(g->grads);
    const int64_t numel = g->params.numel();
    const int64_t per_piece = std::max<int64_t>(1, piece_bytes / static_cast<int64_t>(g->params.element_size()));
    for (int64_t begin = 0; begin < numel; begin += per_piece)
      pieces_.push_back({i, begin, std::min(numel, begin + per_piece)});
    group_pointers_.push_back(&g->abi);
    groups_.push_back(std::move(g));
  }
  abi_groups_ = view;  // sparse tables, if any, stay the device's (none for the dense optimizer)
  abi_groups_.groups = group_pointers_.data();
  abi_groups_.group_count = group_pointers_.size();
  copies_ = std::make_unique<Copies>(device, pieces_.size());
  sent_.assign(pieces_.size(), false);
  resend_.assign(pieces_.size(), false);
  std::vector<at::Tensor> device_pieces;
  for (const Piece& p : pieces_) device_pieces.push_back(piece_of(groups_[p.group]->device_grads, p));
  param_pieces_ = pieces_of_gradients(early_from, device_pieces, piece_params_);
  for (size_t i = 0; i < early_from.size(); ++i)
    accumulators_.push_back(on_gradient_accumulated(early_from[i], [this, i] { on_gradient(i); }));
  missing_.assign(piece_params_.begin(), piece_params_.end());
}

OptimizerOffload::~OptimizerOffload() = default;

at::Tensor OptimizerOffload::piece_of(const at::Tensor& t, const Piece& p) {
  return t.narrow(0, p.begin, p.end - p.begin);
}

void OptimizerOffload::arm() {
  if (param_pieces_.empty()) return;  // no copies during the backward
  armed_ = true;
  missing_.assign(piece_params_.begin(), piece_params_.end());
  sent_.assign(pieces_.size(), false);
  resend_.assign(pieces_.size(), false);
}

void OptimizerOffload::on_gradient(size_t param) {
  if (!armed_) return;  // micro-batches before the last accumulate on the device
  for (size_t k : param_pieces_[param]) {
    if (sent_[k]) resend_[k] = true;  // a second gradient (a parameter used in two graphs): copy it again later
    if (--missing_[k] != 0) continue;
    copies_->after_compute(/*both_ways=*/false);  // the gradient just accumulated, and all before it
    copy_out(k);
    sent_[k] = true;
  }
}

void OptimizerOffload::copy_out(size_t k) {
  const Piece& p = pieces_[k];
  Group& g = *groups_[p.group];
  if (stale_) copies_->to_host(piece_of(g.params, p), piece_of(g.device_params, p));
  copies_->to_host(piece_of(g.grads, p), piece_of(g.device_grads, p));
  copies_->mark_arrived(k);
}

void OptimizerOffload::step(bool by_pieces, const at::Tensor& clip, const Update& update) {
  copies_->after_compute(/*both_ways=*/true);  // behind the backward, the gradient norm and the rest
  early_count_ = 0;
  for (size_t k = 0; k < pieces_.size(); ++k) {
    if (armed_ && sent_[k] && !resend_[k]) {
      ++early_count_;
      continue;
    }
    copy_out(k);
  }
  if (armed_ && !told_early_) {  // once: whether the copies overlap the backward at all
    told_early_ = true;
    spdlog::info("offload: {} of {} pieces went to the host during the backward of the step's last micro-batch{}",
                 early_count_, pieces_.size(),
                 early_count_ < pieces_.size() ? "; the rest after it (parameters no gradient reached, or one reached "
                                                 "twice)" : "");
  }
  armed_ = false;
  stale_ = false;
  // Where the step without offload multiplies the device's gradients: the same product here,
  // by the factor in each group's dtype (FlatParams::scale_grads), made once a step.
  std::vector<at::Tensor> factors;
  if (clip.defined()) {
    const at::Tensor on_host = clip.to(at::kCPU);  // the step's one wait for the device's norm
    if (on_host.item<double>() != 1.0)              // x 1 changes no bit
      for (const auto& g : groups_) factors.push_back(on_host.to(g->grads.scalar_type()));
  }
  const auto clipped = [&](const Piece& p) {
    if (!factors.empty()) piece_of(groups_[p.group]->grads, p).mul_(factors[p.group]);
  };
  if (!by_pieces) {
    if (!pieces_.empty()) copies_->wait_arrived(pieces_.size() - 1);  // one stream: the last comes last
    for (const Piece& p : pieces_) clipped(p);
    update(Piece{});
  }
  for (size_t k = 0; k < pieces_.size(); ++k) {
    const Piece& p = pieces_[k];
    if (by_pieces) {
      copies_->wait_arrived(k);
      clipped(p);
      update(p);
    }
    Group& g = *groups_[p.group];
    copies_->to_device(piece_of(g.device_params, p), piece_of(g.params, p));
  }
  copies_->end();
}

int64_t OptimizerOffload::host_bytes() const {
  int64_t bytes = 0;
  for (const auto& g : groups_) bytes += static_cast<int64_t>(g->params.nbytes() + g->grads.nbytes());
  return bytes;
}

}  // namespace loom
