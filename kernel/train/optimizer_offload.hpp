// optimizer_offload.hpp: [distributed] offload = "optimizer", ZeRO-Offload's split of the
// step (Ren et al. 2021): the optimizer updates a copy of this rank's parameter slices in host
// memory, so its state (AdamW's two moments: 8 bytes a parameter in fp32) lives there and
// never on the device. Each step the reduced, clipped gradients come to the host, the
// optimizer runs on the CPU, and the updated slices go back before the next forward.
//
// The copies mirror FlatParams' optimizer view group for group (same dtype, same segment
// table), so the optimizer cannot tell them apart and its checkpointed state is the same as
// without offload. On CUDA the host buffers are pinned and the copies run on two side
// streams. With an optimizer that updates element by element (LOOM_OPTIMIZER_ELEMENTWISE:
// adamw, sgd) the step goes piece by piece ([distributed] offload_piece_mb), so one piece's
// copy to the host and another's copy back overlap the CPU's update of a third; the result
// is the whole step's, bit for bit. The next forward waits for the last copy back.
//
// In one process the copies to the host start during the backward of the step's last
// micro-batch: a post-hook on each parameter's gradient accumulator counts what each piece
// still waits for, and a piece whose parameters all got their gradient goes out at once (a
// parameter that gets another gradient after that has its piece copied again at the step).
// The clipping factor is then applied to the host copies, which the device's gradients no
// longer carry: the same fp32 product, so the same bits.
#pragma once

#include <ATen/ATen.h>
#include <loom/abi.h>

#include <functional>
#include <memory>
#include <vector>

#include "abi/compute_components.hpp"
#include "train/flat_params.hpp"

namespace loom {

class OptimizerOffload {
 public:
  // Host copies of every group of flat's optimizer view, cut into pieces of at most
  // piece_bytes; the parameters are read at the first step (after init_from and any resume
  // wrote them). early_from: the trainable parameters whose gradients are bound to flat's
  // buffers, for copies during the backward (one process only: with more the gradients are
  // final only once reduced); empty: every copy waits for step().
  OptimizerOffload(const FlatParams& flat, int64_t piece_bytes, const std::vector<ModelParam>& early_from = {});
  ~OptimizerOffload();
  OptimizerOffload(const OptimizerOffload&) = delete;
  OptimizerOffload& operator=(const OptimizerOffload&) = delete;

  // The view to create the optimizer with; valid as long as this object.
  const loom_param_groups& abi() const { return abi_groups_; }

  // Elements [begin, end) of one group; begin == end stands for every group, whole.
  struct Piece {
    size_t group = 0;
    int64_t begin = 0, end = 0;
  };
  using Update = std::function<void(const Piece&)>;
  // One optimizer step on the host copies: the gradients (reduced and clipped) to the host,
  // and the parameters too when the device's were written since (the first step, a
  // checkpoint load); `update` runs there; the parameters go back. by_pieces: `update` is
  // called once per piece, in order, each as soon as its copies arrived; otherwise once,
  // with the whole (Piece{}), after every copy arrived.
  // clip: the clipping factor (0-dim float, on the device; undefined: no clipping), by which
  // the host copies are multiplied before `update` where the device's gradients are not.
  void step(bool by_pieces, const at::Tensor& clip, const Update& update);
  // Before the backward of the step's last micro-batch (never inside a CUDA graph's capture):
  // a piece whose parameters all get their gradient goes to the host at once.
  void arm();
  // The device's gradients changed after the backward (a model's own units rescaled them) or
  // the step is skipped: what went out early is copied again at the next step().
  void disarm() { armed_ = false; }
  // How many pieces went to the host during the last armed backward (and stayed valid).
  size_t early_pieces() const { return early_count_; }
  // The device's parameters were written (a resume, a rollback): read them again next step.
  void parameters_written() { stale_ = true; }
  // The host memory the copies take (the optimizer's own state comes on top).
  int64_t host_bytes() const;
  const std::vector<Piece>& pieces() const { return pieces_; }

 private:
  struct Group {
    at::Tensor device_params, device_grads;  // the optimizer view's slices in the flat buffers
    at::Tensor params, grads;                // their host copies, which the optimizer sees
    loom_param_group abi;
  };
  class Copies;  // how the pieces travel: in order on the CPU, on side streams on CUDA
  static at::Tensor piece_of(const at::Tensor& t, const Piece& p);
  void copy_out(size_t piece);  // the piece's gradients (and parameters when stale) to the host
  void on_gradient(size_t param);  // a parameter's gradient was accumulated

  std::vector<std::unique_ptr<Group>> groups_;  // stable addresses for the ABI pointers
  std::vector<const loom_param_group*> group_pointers_;
  loom_param_groups abi_groups_{};
  std::vector<Piece> pieces_;  // every group cut in order; none for an empty group
  std::unique_ptr<Copies> copies_;
  bool stale_ = true;
  // Copies during the backward: the pieces each parameter's gradient lies in, what each piece
  // still waits for, and which pieces went out (sent) or got a gradient after (resend).
  std::vector<std::vector<size_t>> param_pieces_;
  std::vector<size_t> piece_params_;
  std::vector<int64_t> missing_;
  std::vector<bool> sent_, resend_;
  std::vector<std::shared_ptr<const void>> accumulators_;  // keep the hooks alive
  bool armed_ = false, told_early_ = false;
  size_t early_count_ = 0;
};

}  // namespace loom
