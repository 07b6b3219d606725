#include "train/flat_params.hpp"

#include <ATen/core/grad_mode.h>
#include <loom/torch.hpp>

#include <algorithm>
#include <map>

#include "base/failure.hpp"
#include "train/cpu_memory.hpp"
#include "train/mapped_cuda_memory.hpp"

namespace loom {

ShardMode shard_mode_from_name(const std::string& name) {
  if (name == "none") return ShardMode::none;
  if (name == "optimizer") return ShardMode::optimizer;
  if (name == "gradients") return ShardMode::gradients;
  if (name == "parameters") return ShardMode::parameters;
  throw usage_failure("[distributed] shard = \"" + name +
                      "\": use \"none\", \"optimizer\", \"gradients\" or \"parameters\"");
}

const char* shard_mode_name(ShardMode mode) {
  switch (mode) {
    case ShardMode::optimizer: return "optimizer";
    case ShardMode::gradients: return "gradients";
    case ShardMode::parameters: return "parameters";
    default: return "none";
  }
}

namespace {

// A buffer that reads as zeros; on the CPU its pages stay untouched until written.
at::Tensor lazily_zeroed(int64_t numel, const at::TensorOptions& options) {
  at::Tensor out = at::empty({numel}, options);
  release_memory(out, /*zeroed=*/true);
  return out;
}

}  // namespace

FlatParams::FlatParams(const std::vector<ModelParam>& params, ShardSpec shard)
    : FlatParams(params, shard, true, std::nullopt) {}

FlatParams::FlatParams(const std::vector<ModelParam>& params, ShardSpec shard, LayoutOnly layout)
    : FlatParams(params, shard, false, layout.device) {}

FlatParams::FlatParams(const std::vector<ModelParam>& params, ShardSpec shard, bool copy_values,
                       std::optional<at::Device> device)
    : shard_(shard) {
  if (shard_.placed_world_size == 0) shard_.placed_rank = shard_.rank, shard_.placed_world_size = shard_.world_size;
  for (const auto& [rank, ranks] : {std::pair{shard_.rank, shard_.world_size}, std::pair{shard_.placed_rank, shard_.placed_world_size}})
    if (ranks < 1 || rank < 0 || rank >= ranks)
      throw runtime_failure("flat parameters: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  // Group by (device, dtype, placed or not), keeping reverse registration order inside each group.
  std::map<std::string, std::vector<const ModelParam*>> by_group;
  std::vector<std::string> order, placed_order;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const at::Tensor& t = *it->tensor;
    if (!t.defined() || !t.is_floating_point())
      throw runtime_failure("parameter \"" + it->name + "\" must be a defined floating-point tensor");
    const bool placed = placed_here(*it);
    const std::string key = device.value_or(t.device()).str() + "/" + std::string(c10::toString(t.scalar_type())) +
                            (placed ? "/placed" : "");
    if (!by_group.count(key)) (placed && shard_.stage_layers ? placed_order : order).push_back(key);
    by_group[key].push_back(&*it);
  }
  order.insert(order.end(), placed_order.begin(), placed_order.end());
  at::NoGradGuard no_grad;
  for (const auto& key : order) {
    auto group = std::make_unique<Group>();
    const auto& members = by_group[key];
    group->placed = placed_here(*members.front());
    group->sharded = sharded() && (!group->placed || shard_.shard_placed);
    if (group->sharded) {
      group->rank = group->placed ? shard_.placed_rank : shard_.rank;
      group->ranks = group->placed ? shard_.placed_world_size : shard_.world_size;
    }
    const int64_t world = group->ranks;
    for (const ModelParam* p : members) group->numel += p->tensor->numel();
    // Padding to a multiple of the world size gives every rank an equal chunk to all-gather.
    const int64_t padded = group->sharded ? (group->numel + world - 1) / world * world : group->numel;
    const at::TensorOptions options =
        members.front()->tensor->options().device(device.value_or(members.front()->tensor->device())).requires_grad(false);
    const bool mapped = shard_.mapped_buffers && options.device().is_cuda();
    const auto buffer = [&](bool zero_on_map) {
      if (mapped && !copy_values)  // a sliced start: the owned slices are mapped below
        return mapped_cuda_reserved(padded, options.dtype().toScalarType(), options.device(), zero_on_map);
      if (mapped) return mapped_cuda_zeros(padded, options.dtype().toScalarType(), options.device(), zero_on_map);
      return copy_values ? at::zeros({padded}, options) : lazily_zeroed(padded, options);
    };
    group->params = buffer(/*zero_on_map=*/false);  // gathered before they are read
    group->grads = buffer(/*zero_on_map=*/true);    // read as zeros where they were given back
    const int64_t chunk = padded / world;
    group->owned = OwnedSlice{0, group->numel};
    if (group->sharded) {
      group->owned.start = std::min(group->numel, chunk * group->rank);
      group->owned.length = std::min(group->numel, group->owned.start + chunk) - group->owned.start;
    }
    if (mapped && !copy_values) {
      acquire_mapped(group->params.narrow(0, group->owned.start, group->owned.length));
      acquire_mapped(group->grads.narrow(0, group->owned.start, group->owned.length));
    }
    int64_t offset = 0;
    for (const ModelParam* p : members) {
      at::Tensor& param = *p->tensor;
      const int64_t n = param.numel();
      group->whole.push_back({p->name, param.sizes().vec(), loom_param_segment{}});
      loom_param_segment& abi = group->whole.back().abi;
      abi.offset = offset;
      abi.numel = n;
      abi.flags = p->flags;
      const Place place{group.get(), group->whole.size() - 1};
      places_[p->name] = place;
      if (copy_values) {
        view_of(place).copy_(param.detach());
        bind(place, param);
      }
      offset += n;
    }
    build_optimizer_view(*group);
    group_pointers_.push_back(&group->abi);
    groups_.push_back(std::move(group));
  }
  abi_groups_ = loom_param_groups{};
  abi_groups_.struct_size = sizeof(loom_param_groups);
  abi_groups_.groups = group_pointers_.data();
  abi_groups_.group_count = group_pointers_.size();
}

const FlatParams::Place* FlatParams::place_of(const std::string& name, const at::Tensor& param) const {
  const auto it = places_.find(name);
  if (it == places_.end()) return nullptr;
  const Group& g = *it->second.group;
  const Segment& laid = g.whole[it->second.segment];
  if (param.sizes().vec() != laid.shape || param.scalar_type() != g.params.scalar_type() ||
      param.device() != g.params.device())
    throw runtime_failure("parameter \"" + name + "\" was created as " + param.toString() + " " +
                          c10::str(param.sizes()) + " on " + param.device().str() + ", but the model's first build made it " +
                          g.params.toString() + " " + c10::str(at::IntArrayRef(laid.shape)) + " on " +
                          g.params.device().str() + ": its create must make the same parameters every time");
  return &it->second;
}

at::Tensor FlatParams::view_of(const Place& place) const {
  const Segment& laid = place.group->whole[place.segment];
  return place.group->params.narrow(0, laid.abi.offset, laid.abi.numel).view(laid.shape);
}

void FlatParams::bind(const Place& place, at::Tensor& param) const {
  const Segment& laid = place.group->whole[place.segment];
  param.set_data(view_of(place));
  param.mutable_grad() = place.group->grads.narrow(0, laid.abi.offset, laid.abi.numel).view(laid.shape);
}

bool FlatParams::write_owned(const std::string& name, const at::Tensor& param, const at::Tensor& value) {
  const Place* place = place_of(name, param);
  if (!place) return false;
  at::NoGradGuard no_grad;
  const Group& g = *place->group;
  const loom_param_segment& laid = g.whole[place->segment].abi;
  // Only the part inside the owned slice is written: the rest of the buffer keeps no pages.
  const int64_t first = std::max(laid.offset, g.owned.start);
  const int64_t last = std::min(laid.offset + laid.numel, g.owned.start + g.owned.length);
  if (first < last)
    g.params.narrow(0, first, last - first).copy_(value.detach().reshape({-1}).narrow(0, first - laid.offset, last - first));
  return true;
}

bool FlatParams::adopt(const std::string& name, at::Tensor& param) {
  if (!write_owned(name, param, param)) return false;
  bind(places_.at(name), param);
  return true;
}

size_t FlatParams::take_over(const std::vector<ModelParam>& params) {
  at::NoGradGuard no_grad;
  size_t adopted = 0, count = 0;
  for (const ModelParam& p : params) {
    const Place* place = place_of(p.name, *p.tensor);
    if (!place)
      throw runtime_failure("parameter \"" + p.name + "\" is not in the layout of the model's first build: its create "
                            "must make the same parameters every time");
    ++count;
    if (p.tensor->data_ptr() == view_of(*place).data_ptr()) {
      ++adopted;
      continue;
    }
    adopt(p.name, *p.tensor);  // the owned part: a mapped buffer holds no memory elsewhere
  }
  if (count != places_.size())
    throw runtime_failure("the model has " + std::to_string(count) + " parameters where its first build had " +
                          std::to_string(places_.size()) + ": its create must make the same parameters every time");
  return adopted;
}

bool FlatParams::placed_here(const ModelParam& param) const {
  return param.expert() || (shard_.stage_layers && param.unit >= 0);
}

// The optimizer's view of a group: the owned slice of both buffers and the segments inside it,
// offsets relative to the slice; a parameter cut by a slice edge is marked partial.
void FlatParams::build_optimizer_view(Group& group) {
  const int64_t begin = group.owned.start, end = begin + group.owned.length;
  for (const Segment& whole : group.whole) {
    const int64_t first = std::max(begin, whole.abi.offset);
    const int64_t last = std::min(end, whole.abi.offset + whole.abi.numel);
    if (first >= last) continue;
    auto segment = std::make_unique<Segment>();
    segment->name = whole.name;
    segment->shape = whole.shape;
    loom_param_segment& abi = segment->abi;
    abi = loom_param_segment{};
    abi.struct_size = sizeof(abi);
    abi.name = segment->name.c_str();
    abi.offset = first - begin;
    abi.numel = last - first;
    abi.ndim = static_cast<int32_t>(segment->shape.size());
    abi.shape = segment->shape.data();
    abi.flags = whole.abi.flags;
    if (last - first != whole.abi.numel) abi.flags |= LOOM_PARAM_FLAG_PARTIAL;
    group.segment_pointers.push_back(&segment->abi);
    group.segments.push_back(std::move(segment));
  }
  group.abi = loom_param_group{};
  group.abi.struct_size = sizeof(loom_param_group);
  group.owned_params = group.params.narrow(0, begin, group.owned.length);
  group.owned_grads = group.grads.narrow(0, begin, group.owned.length);
  group.abi.params = handle(group.owned_params);
  group.abi.grads = handle(group.owned_grads);
  group.abi.segments = group.segment_pointers.data();
  group.abi.segment_count = group.segment_pointers.size();
}

void FlatParams::zero_grad() {
  // Reducing to owners, the rest was released (and reads as zeros) after the last step.
  for (auto& g : groups_) used_grads(*g).zero_();
}

std::vector<at::Tensor> FlatParams::resident_gradients() const {
  std::vector<at::Tensor> parts;
  for (const auto& g : groups_) parts.push_back(used_grads(*g));
  return parts;
}

at::Tensor FlatParams::grad_norm() const { return owned_grad_square_sum().sqrt().to(at::kFloat); }

namespace {

// Sums of squares are kept in double on the CPU: LibTorch's CPU norm of a float tensor adds the
// squares one by one in float, which drifts by 3e-6 of the norm at 1e5 elements and 4e-5 at 1e6
// (measured against double), and clipping carries that into every update. In double, the order in
// which a layout adds them (one process, pipeline stages, ranks' slices) moves the sum by about
// 1e-16, so the fp32 norm, and the clipped update, are one process's. CUDA's norm reduces as a
// tree in fp32.
at::TensorOptions square_options(const at::Device& device) {
  return at::TensorOptions().device(device).dtype(device.is_cuda() ? at::kFloat : at::kDouble);
}

// The sum of t's squares (square_options), chunked to bound the temporary.
at::Tensor squares_of(const at::Tensor& t) {
  if (t.is_cuda()) return at::linalg_vector_norm(t, 2, std::nullopt, false, at::kFloat).square();
  constexpr int64_t kChunk = int64_t{1} << 20;
  const at::Tensor flat = t.reshape({-1});
  at::Tensor sum = at::zeros({}, square_options(t.device()));
  for (int64_t i = 0; i < flat.numel(); i += kChunk)
    sum += flat.narrow(0, i, std::min(kChunk, flat.numel() - i)).to(at::kFloat).pow(2).sum(at::kDouble);
  return sum;
}

at::Tensor square_sum(const std::vector<at::Tensor>& parts) {
  at::Tensor squares;
  for (const at::Tensor& used : parts) {
    at::Tensor s = squares_of(used);
    squares = squares.defined() ? squares + s.to(squares.device()) : s;
  }
  return squares.defined() ? squares : at::zeros({}, square_options(at::kCPU));
}

}  // namespace

// Reducing to owners, only the owned slice of a sharded group holds the reduced sum (the rest is
// partial sums or given back); otherwise the whole buffer is the reduced gradient (padding: 0).
at::Tensor FlatParams::used_grads(const Group& g) const {
  return g.sharded && reduces_to_owner() ? g.owned_grads : g.grads;
}

at::Tensor FlatParams::owned_grad_square_sum() const { return square_sum(resident_gradients()); }

at::Tensor FlatParams::owned_grad_square_sum(std::optional<bool> placed) const {
  std::vector<at::Tensor> parts;
  for (const auto& g : groups_)
    if (!placed || g->placed == *placed) parts.push_back(used_grads(*g));
  if (parts.empty() && !groups_.empty())
    return at::zeros({}, square_options(groups_.front()->grads.device()));
  return square_sum(parts);
}

std::vector<bool> FlatParams::placed_groups() const {
  std::vector<bool> out;
  for (const auto& g : groups_) out.push_back(g->placed);
  return out;
}

std::vector<bool> FlatParams::sharded_groups() const {
  std::vector<bool> out;
  for (const auto& g : groups_) out.push_back(g->sharded);
  return out;
}

at::Tensor FlatParams::owned_grad_square_sum(const std::set<std::string>& names, std::optional<bool> placed) const {
  if (groups_.empty()) return at::zeros({}, square_options(at::kCPU));
  const at::Device device = groups_.front()->grads.device();
  std::vector<at::Tensor> sums{at::zeros({}, square_options(device))};
  for (const auto& g : groups_) {
    if (placed && g->placed != *placed) continue;
    const OwnedSlice used = g->sharded && reduces_to_owner() ? g->owned : OwnedSlice{0, g->numel};
    for (const Segment& s : g->whole) {
      if (!names.count(s.name)) continue;
      const int64_t begin = std::max(s.abi.offset, used.start);
      const int64_t end = std::min(s.abi.offset + s.abi.numel, used.start + used.length);
      if (begin < end)
        sums.push_back(squares_of(g->grads.narrow(0, begin, end - begin)).to(device));
    }
  }
  return at::stack(sums).sum();
}

at::Tensor clip_factor(const at::Tensor& norm, double max_norm) { return (max_norm / (norm + 1e-6)).clamp_max(1.0); }


void FlatParams::scale_grads(const at::Tensor& factor) {
  for (auto& g : groups_) {
    (g->sharded ? g->owned_grads : g->grads).mul_(factor.to(g->grads.device(), g->grads.scalar_type()));
  }
}

std::vector<int> FlatParams::sharing_ranks() const {
  std::vector<int> out;
  for (const auto& g : groups_) out.push_back(g->ranks);
  return out;
}

std::vector<at::Tensor> FlatParams::param_buffers() const {
  std::vector<at::Tensor> out;
  for (const auto& g : groups_) out.push_back(g->params);
  return out;
}

std::vector<at::Tensor> FlatParams::whole_params() const {
  std::vector<at::Tensor> out;
  for (const auto& g : groups_) out.push_back(g->params.narrow(0, 0, g->numel));
  return out;
}

std::vector<OwnedSlice> FlatParams::owned_slices() const {
  std::vector<OwnedSlice> out;
  for (const auto& g : groups_) out.push_back(g->owned);
  return out;
}

std::vector<std::vector<FlatParams::SegmentInfo>> FlatParams::segment_tables() const {
  std::vector<std::vector<SegmentInfo>> out;
  for (const auto& g : groups_) {
    out.emplace_back();
    for (const Segment& s : g->whole) out.back().push_back({s.name, s.abi.offset, s.abi.numel, s.shape});
  }
  return out;
}

std::vector<FlatParams::GradBucket> FlatParams::grad_buckets(int64_t max_bytes) const {
  std::vector<GradBucket> out;
  for (const auto& g : groups_) {
    const int64_t per_bucket = std::max<int64_t>(1, max_bytes / g->grads.element_size());
    const int64_t padded = g->grads.numel(), chunk = padded / g->ranks;
    for (int rank = 0; rank < g->ranks; ++rank) {
      // Whole, the one "chunk" is the whole buffer; sharded, buckets stop at slice edges.
      const int64_t begin = g->sharded ? chunk * rank : 0, end = g->sharded ? begin + chunk : padded;
      for (int64_t start = begin; start < end; start += per_bucket)
        out.push_back({g->grads.narrow(0, start, std::min(per_bucket, end - start)), g->sharded ? rank : -1, g->placed});
      if (!g->sharded) break;
    }
  }
  return out;
}

int64_t FlatParams::numel() const {
  int64_t n = 0;
  for (const auto& g : groups_) n += g->numel;
  return n;
}

}  // namespace loom
