// flat_params.hpp: parameters and gradients as views into one flat buffer per dtype and
// device (docs/design.md "One training step"). zero_grad, the global norm, clipping and the whole
// optimizer update then touch a few large tensors instead of every parameter.
//
// Segments are laid out in reverse registration order: backward produces the last layers'
// gradients first, so a prefix of the gradient buffer fills up first (data-parallel buckets).
// Parameters placed on this rank alone get groups of their own, "placed groups", whose gradients
// are summed over the ranks holding the same ones (train/grad_sync.hpp): experts
// (LOOM_PARAM_FLAG_EXPERT) under expert parallelism, and a pipeline stage's layers when each
// stage holds only its own (ShardSpec::stage_layers).
//
// Sharded ([distributed] shard, ZeRO-1/2): each buffer is padded to a multiple of the world
// size (a placed group's: of the ranks holding it, ShardSpec::placed_world_size) and rank r owns
// the r-th equal slice. The optimizer sees only that slice (its segment
// table cut at the slice's edges), so it keeps state for 1/N of the parameters.
#pragma once

#include <ATen/ATen.h>
#include <loom/abi.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "abi/compute_components.hpp"

namespace loom {

// What the ranks split between them: "none" (replicated), "optimizer" (ZeRO-1: optimizer
// state; gradients all-reduced whole), "gradients" (ZeRO-2: also gradients, reduced to their
// owner only; outside its slice a rank's gradient buffer is released after each step) or
// "parameters" (ZeRO-3: also the weights of the model's units outside the slice, gathered
// around each unit's use by train/parameter_shards.hpp).
enum class ShardMode { none, optimizer, gradients, parameters };
ShardMode shard_mode_from_name(const std::string& name);
const char* shard_mode_name(ShardMode mode);

struct ShardSpec {
  ShardMode mode = ShardMode::none;
  int rank = 0;
  int world_size = 1;
  // false: the placed groups (above) stay whole. Their gradients are summed over other ranks
  // than the rest (train/expert_placement.hpp, train/stage_placement.hpp), and each rank already
  // holds only its share of them.
  bool shard_placed = true;
  // Pipeline stages holding their own layers only: the parameters of layers (ModelParam::unit
  // >= 0) are placed, and their groups come after every other group (whose order is then one
  // process's: train/stage_placement.hpp maps the optimizer's state between the two).
  bool stage_layers = false;
  // The placed groups are cut among the ranks holding the same ones (a pipeline stage's
  // replicas) rather than among all world_size: this rank's place among them and their number
  // (0: rank and world_size).
  int placed_rank = 0;
  int placed_world_size = 0;
  // CUDA weight and gradient buffers whose memory can be given back by range
  // (train/mapped_cuda_memory.hpp): shard = "parameters" on a GPU.
  bool mapped_buffers = false;
};

// One rank's part of one flat buffer: elements [start, start + length).
struct OwnedSlice {
  int64_t start = 0, length = 0;
};

// min(1, max_norm / norm) as a tensor on norm's device (no host sync): the factor that clips
// gradients of global norm `norm` to at most max_norm.
at::Tensor clip_factor(const at::Tensor& norm, double max_norm);

class FlatParams {
 public:
  // Rebinds every parameter's storage (set_data) to a view of the flat buffer of its dtype
  // and device, and every gradient to a view of the matching gradient buffer.
  explicit FlatParams(const std::vector<ModelParam>& params, ShardSpec shard = {});
  // The layout alone (train/sliced_start.hpp): params only give names, shapes, dtypes and
  // order, and are not rebound; on the CPU no page of the buffers is touched (they read as
  // zeros). The parameters of the model actually used then come through adopt() and take_over().
  // device: where those will be, when not where params are (a first build on the CPU for a CUDA
  // run); there mapped buffers (ShardSpec::mapped_buffers) map only the owned slices, the
  // gradients' as zeros.
  struct LayoutOnly {
    std::optional<at::Device> device;
  };
  FlatParams(const std::vector<ModelParam>& params, ShardSpec shard, LayoutOnly);
  FlatParams(const FlatParams&) = delete;
  FlatParams& operator=(const FlatParams&) = delete;
  FlatParams(FlatParams&&) = default;  // the ABI view points into heap blocks that move along

  // A parameter as its model creates it: copies the part of its value inside this rank's slice
  // into the buffer and rebinds it there (the rest of the value is dropped with the caller's
  // tensor). False when the layout has no parameter of that name (a sparse table). Throws a
  // runtime Failure when its shape, dtype or device differ from the layout's.
  bool adopt(const std::string& name, at::Tensor& param);
  // A value for the named parameter (its shape; any dtype): writes the part inside this rank's
  // slice into the buffer, as adopt() does. False when the layout has no such parameter.
  bool write_owned(const std::string& name, const at::Tensor& param, const at::Tensor& value);
  // Rebinds the parameters adopt() did not take, keeping the owned part of their values as
  // adopt() does; returns how many adopt() had taken. Throws a runtime Failure when params and
  // the layout differ.
  size_t take_over(const std::vector<ModelParam>& params);

  void zero_grad();
  // Per group, the part of the gradient buffer that keeps its values from one step to the next:
  // everything, or the owned slice when reducing to owners (the rest is given back after each
  // step's reduce and reads as zeros).
  std::vector<at::Tensor> resident_gradients() const;
  // L2 norm of the gradients the optimizer will use, as a 0-dim tensor on the device (no host
  // sync). In "gradients" mode that is only this rank's slice: the caller sums the squares of
  // every rank's (owned_grad_square_sum) instead.
  at::Tensor grad_norm() const;
  // Sum of squares of this rank's owned gradient slices, on the first group's device: in double
  // on the CPU (so that the order in which a layout adds them leaves the fp32 norm as it is), in
  // fp32 on CUDA.
  at::Tensor owned_grad_square_sum() const;
  // The part of it that belongs to the named parameters (tensor parallelism: those held whole),
  // of the placed groups or of the others when placed is given.
  at::Tensor owned_grad_square_sum(const std::set<std::string>& names, std::optional<bool> placed = std::nullopt) const;
  // Multiplies the gradients the optimizer will use by a one-element tensor (no host sync).
  void scale_grads(const at::Tensor& factor);

  // The ABI view handed to the optimizer; valid as long as this object.
  const loom_param_groups& abi() const { return abi_groups_; }
  int64_t numel() const;
  // The flat parameter buffers (one per dtype and device), e.g. to broadcast them.
  std::vector<at::Tensor> param_buffers() const;
  // Contiguous slices of the gradient buffers of at most max_bytes each, in buffer order (the
  // reverse of registration: the gradients backward produces first come first). In a sharded
  // group no bucket crosses a slice edge and owner is the rank owning it (among the ranks the group is
  // cut among: a placed group's, its replicas); -1 in a whole group.
  struct GradBucket {
    at::Tensor grads;
    int owner = -1;
    bool placed = false;  // of a placed group
  };
  std::vector<GradBucket> grad_buckets(int64_t max_bytes) const;

  const ShardSpec& shard() const { return shard_; }
  bool sharded() const { return shard_.mode != ShardMode::none; }
  // Whether each gradient bucket of a sharded group is reduced to its owner only ("gradients",
  // "parameters").
  bool reduces_to_owner() const { return shard_.mode == ShardMode::gradients || shard_.mode == ShardMode::parameters; }
  // Per group (in abi() order): whether it is placed, and whether it is sharded.
  std::vector<bool> placed_groups() const;
  std::vector<bool> sharded_groups() const;
  // Per group: how many ranks it is cut among (1 when whole; a placed group's own replicas).
  std::vector<int> sharing_ranks() const;
  // The sums of squares of the gradients the optimizer will use, of the placed groups or of the
  // others, as above.
  at::Tensor owned_grad_square_sum(std::optional<bool> placed) const;

  // Per group (in abi() order): the whole parameter buffer, padding excluded.
  std::vector<at::Tensor> whole_params() const;
  // Per group: this rank's slice of it (everything when not sharded).
  std::vector<OwnedSlice> owned_slices() const;
  // The segment table of each group (whole parameters, offsets into whole_params()).
  struct SegmentInfo {
    std::string name;
    int64_t offset, numel;
    std::vector<int64_t> shape;
  };
  std::vector<std::vector<SegmentInfo>> segment_tables() const;  // SegmentTables, below

 private:
  struct Segment {
    std::string name;
    std::vector<int64_t> shape;
    loom_param_segment abi;
  };
  struct Group {
    bool placed = false;       // a placed group (experts, or a stage's layers)
    bool sharded = false;      // cut among the ranks (shard mode, and placed ones only when shard_placed)
    int rank = 0, ranks = 1;   // this rank's slice among how many (the placed ones' own when sharded)
    at::Tensor params, grads;  // padded to a multiple of world_size when sharded
    int64_t numel = 0;         // without the padding
    OwnedSlice owned;
    at::Tensor owned_params, owned_grads;  // the optimizer's views of the owned slice
    std::vector<Segment> whole;                      // every parameter, for checkpoints
    std::vector<std::unique_ptr<Segment>> segments;  // the optimizer's table; stable addresses for the ABI pointers
    std::vector<const loom_param_segment*> segment_pointers;
    loom_param_group abi;
  };
  struct Place {
    Group* group;
    size_t segment;  // in group->whole
  };
  FlatParams(const std::vector<ModelParam>& params, ShardSpec shard, bool copy_values,
             std::optional<at::Device> device);
  bool placed_here(const ModelParam& param) const;
  const Place* place_of(const std::string& name, const at::Tensor& param) const;
  at::Tensor view_of(const Place& place) const;
  void bind(const Place& place, at::Tensor& param) const;
  void build_optimizer_view(Group& group);
  // The part of a group's gradients that holds the reduced sum after a step's sync.
  at::Tensor used_grads(const Group& group) const;

  ShardSpec shard_;
  std::vector<std::unique_ptr<Group>> groups_;
  std::map<std::string, Place> places_;
  std::vector<const loom_param_group*> group_pointers_;
  loom_param_groups abi_groups_{};
};

// Per group, its segments (FlatParams::segment_tables).
using SegmentTables = std::vector<std::vector<FlatParams::SegmentInfo>>;

}  // namespace loom
