#include "train/parameter_shards.hpp"

#include <ATen/core/grad_mode.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "base/failure.hpp"
#include "train/cpu_memory.hpp"
#include "train/grad_sync.hpp"
#include "train/mapped_cuda_memory.hpp"

namespace loom {
namespace {

struct Span {
  size_t group;
  int64_t begin, end;
};

// [begin, end) of group g cut where rank slices of `chunk` elements end.
std::vector<std::pair<Span, int>> cut_at_slices(const Span& span, int64_t chunk) {
  std::vector<std::pair<Span, int>> out;
  for (int64_t at = span.begin; at < span.end;) {
    const int owner = static_cast<int>(at / chunk);
    const int64_t stop = std::min(span.end, (owner + 1) * chunk);
    out.push_back({{span.group, at, stop}, owner});
    at = stop;
  }
  return out;
}

}  // namespace

ParameterShards::ParameterShards(const std::vector<ModelParam>& params, FlatParams& flat, Communicator& comm,
                                 const std::string& model)
    : flat_(flat), comm_(comm), model_(model) {
  // Where each parameter lives in the flat buffers.
  std::map<std::string, Span> where;
  const auto tables = flat.segment_tables();
  for (size_t g = 0; g < tables.size(); ++g)
    for (const auto& s : tables[g]) where[s.name] = {g, s.offset, s.offset + s.numel};
  int64_t count = 0;
  for (const ModelParam& p : params) count = std::max(count, p.unit + 1);
  if (count == 0)
    throw usage_failure("[distributed] shard = \"parameters\": model " + model +
                        " declares no units (layers), so there is nothing to gather layer by layer; use shard = "
                        "\"gradients\", or declare units in the model (sdk/README.md, \"Units\")");
  // Each unit: one contiguous span per group.
  std::vector<std::map<size_t, Span>> spans(static_cast<size_t>(count));
  units_.resize(static_cast<size_t>(count));
  std::vector<std::vector<Span>> in_units(tables.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const ModelParam& p = params[i];
    if (p.unit < 0) continue;
    const Span s = where.at(p.name);
    auto& mine = spans[static_cast<size_t>(p.unit)];
    auto it = mine.find(s.group);
    if (it == mine.end()) mine[s.group] = s;
    else if (s.end == it->second.begin) it->second.begin = s.begin;  // the buffer holds the reverse order
    else if (s.begin == it->second.end) it->second.end = s.end;
    else
      throw usage_failure("[distributed] shard = \"parameters\": model " + model + " registers parameter \"" +
                          p.name + "\" of unit " + std::to_string(p.unit) +
                          " apart from the unit's other parameters; a unit's parameters must be registered one "
                          "after another");
    units_[static_cast<size_t>(p.unit)].params += 1;
    accumulators_.push_back(on_gradient_accumulated(p, [this, unit = p.unit] {
      Unit& u = units_[static_cast<size_t>(unit)];
      if (u.missing > 0 && --u.missing == 0) release(u);  // backward is done with its weights
    }));
  }
  const std::vector<at::Tensor> buffers = flat.param_buffers();
  const std::vector<OwnedSlice> owned = flat.owned_slices();
  const auto add_pieces = [&](const Span& span, std::vector<Piece>& pieces, std::vector<at::Tensor>* unowned) {
    const int64_t chunk = buffers[span.group].numel() / flat.shard().world_size;
    for (const auto& [piece, owner] : cut_at_slices(span, chunk)) {
      const at::Tensor range = buffers[span.group].narrow(0, piece.begin, piece.end - piece.begin);
      pieces.push_back({range, owner});
      const bool mine = piece.begin >= owned[span.group].start &&
                        piece.end <= owned[span.group].start + owned[span.group].length;
      if (unowned && !mine) unowned->push_back(range);
    }
  };
  for (size_t u = 0; u < units_.size(); ++u) {
    if (spans[u].empty())
      throw usage_failure("[distributed] shard = \"parameters\": model " + model + " declares units 0.." +
                          std::to_string(count - 1) + " but unit " + std::to_string(u) +
                          " has no parameters; number units from 0 without gaps");
    for (const auto& [group, span] : spans[u]) {
      add_pieces(span, units_[u].pieces, &units_[u].unowned);
      in_units[group].push_back(span);
    }
  }
  // The weights outside every unit: the gaps between the units' spans.
  for (size_t g = 0; g < buffers.size(); ++g) {
    auto& taken = in_units[g];
    std::sort(taken.begin(), taken.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
    int64_t at = 0;
    const int64_t numel = flat.whole_params()[g].numel();
    for (const Span& s : taken) {
      if (s.begin > at) add_pieces({g, at, s.begin}, root_.pieces, &root_.unowned);
      at = s.end;
    }
    if (at < numel) add_pieces({g, at, numel}, root_.pieces, &root_.unowned);
  }
  release_all();
  set_unit_boundaries(this);
}

ParameterShards::~ParameterShards() {
  set_unit_boundaries(nullptr);
  if (const int64_t peak = peak_mapped_cuda_bytes(); peak > 0)
    spdlog::info("[distributed] shard = \"parameters\": at most {:.1f} MiB of weights and gradients were mapped on "
                 "the GPU at once, of {:.1f} MiB whole", static_cast<double>(peak) / (1 << 20),
                 static_cast<double>(reserved_cuda_bytes()) / (1 << 20));
}

ParameterShards::Unit& ParameterShards::unit_at(int64_t unit, const char* phase) {
  if (unit < 0 || unit >= unit_count())
    throw runtime_failure("model " + model_ + ": " + phase + " of unit " + std::to_string(unit) +
                          ", but it declared units 0.." + std::to_string(unit_count() - 1));
  return units_[static_cast<size_t>(unit)];
}

void ParameterShards::start_gather(Unit& u) {
  if (u.state != State::released) return;
  for (const at::Tensor& range : u.unowned) acquire_mapped(range);  // CUDA: memory under it again
  for (Piece& p : u.pieces) u.tickets.push_back(comm_.start_broadcast(p.range, p.owner));
  u.state = State::gathering;
}

void ParameterShards::ensure_gathered(Unit& u) {
  start_gather(u);
  for (uint64_t t : u.tickets) comm_.wait_ticket(t);
  u.tickets.clear();
  u.state = State::gathered;
}

void ParameterShards::release(Unit& u) {
  if (u.state == State::gathering) ensure_gathered(u);  // a broadcast may still write into it
  for (const at::Tensor& range : u.unowned) release_memory(range, /*zeroed=*/false);
  u.state = State::released;
}

void ParameterShards::prefetch(int64_t unit) {
  if (unit >= 0 && unit < unit_count()) start_gather(units_[static_cast<size_t>(unit)]);
}

at::Tensor ParameterShards::enter(int64_t unit, const at::Tensor& x) {
  Unit& u = unit_at(unit, "enter");
  u.entered = true;
  ensure_gathered(u);
  prefetch(unit + 1);  // arrives while this unit computes
  return x;
}

at::Tensor ParameterShards::exit(int64_t unit, const at::Tensor& y) {
  Unit& u = unit_at(unit, "exit");
  if (at::GradMode::is_enabled() && y.requires_grad()) {
    // Backward reaches this unit's output before any of its own gradients: gather it again
    // there, and start on the unit before it.
    at::Tensor out = y.view_as(y);
    out.register_hook([this, unit](const at::Tensor& grad) {
      ensure_gathered(units_[static_cast<size_t>(unit)]);
      prefetch(unit - 1);
      return grad;
    });
    release(u);
    return out;
  }
  release(u);
  return y;
}

void ParameterShards::begin_backward() {
  if (!checked_entered_) {
    checked_entered_ = true;
    for (size_t i = 0; i < units_.size(); ++i)
      if (!units_[i].entered)
        throw runtime_failure("model " + model_ + " declares unit " + std::to_string(i) +
                              " but its forward never called enter_unit for it; shard = \"parameters\" needs "
                              "enter_unit/exit_unit around every unit (sdk/README.md, \"Units\")");
  }
  for (Unit& u : units_) u.missing = u.params;
}

void ParameterShards::gather_root() { ensure_gathered(root_); }

void ParameterShards::acquire_all() {
  for (Unit* u : all_units())
    for (const at::Tensor& range : u->unowned) acquire_mapped(range);
}

std::vector<ParameterShards::Unit*> ParameterShards::all_units() {
  std::vector<Unit*> out{&root_};
  for (Unit& u : units_) out.push_back(&u);
  return out;
}

void ParameterShards::release_all() {
  for (Unit& u : units_) release(u);
  release(root_);
}

int64_t ParameterShards::resident_param_bytes() const {
  int64_t bytes = 0;
  for (const OwnedSlice& s : flat_.owned_slices()) bytes += s.length;
  return bytes * (flat_.param_buffers().empty() ? 4 : flat_.param_buffers()[0].element_size());
}

}  // namespace loom
