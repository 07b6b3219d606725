#include "train/stage_placement.hpp"

#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "base/failure.hpp"
#include "train/run_state.hpp"
#include "train/tensor_parallel_checkpoint.hpp"
#include "train/sparse_table_updates.hpp"

namespace loom {

namespace {

const std::string kModel = "model/";
const std::string kOptimizer = "optimizer/";
// Tags of the save's messages: above any training message's (micro-batch x stage x 4).
constexpr int kFirstGatherTag = 1 << 28;
// The frozen checksum's hand-overs, at the start: below the save's.
constexpr int kFirstChecksumTag = 1 << 27;

std::string group_key(const at::Tensor& t) { return t.device().str() + "/" + std::string(c10::toString(t.scalar_type())); }

// The trainable parameters the flat buffers of one process would hold, in its order of groups:
// the keys (device and dtype) as they first appear in reverse registration order.
std::vector<std::string> keys_in_order(const std::vector<ModelParam>& params, bool outside_layers_only) {
  std::vector<std::string> keys;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    if (outside_layers_only && it->unit >= 0) continue;
    const std::string key = group_key(*it->tensor);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return keys;
}

}  // namespace

std::string why_stages_hold_whole_model(const RunPlan& plan, ModelInstance& model) {
  const DistributedSettings& d = plan.distributed;
  if (d.shard == "parameters") return "shard = \"parameters\" with stages holding their own layers is not built";
  // What will train, from the plan: a stage's first build asks before anything is frozen, and
  // its answer must be the trained build's.
  std::vector<ModelParam> params = dense_params(model.params());
  params.erase(std::remove_if(params.begin(), params.end(), [&](const ModelParam& p) { return frozen_by_plan(plan, p); }),
               params.end());
  const bool any_layer = std::any_of(params.begin(), params.end(), [](const ModelParam& p) { return p.unit >= 0; });
  if (!any_layer)
    return "no parameter of model " + model.component().name + " that trains lies in a layer (a model that declares "
           "none, loom_param_view.unit, or [model] freeze taking every layer)";
  // The optimizer's groups line up with one process's when what trains outside layers spans its
  // dtypes in the same order, or when nothing does and the layers are of one dtype (LoRA).
  const std::vector<std::string> outside = keys_in_order(params, true), all = keys_in_order(params, false);
  if (outside != all && !(outside.empty() && all.size() == 1))
    return "model " + model.component().name + "'s trainable parameters outside layers do not come in every dtype "
           "its layers use, so the optimizer's groups would not line up with one process's";
  return "";
}

std::set<std::string> other_stages_layers(ModelInstance& model, const std::vector<int>& stage_of_layer, int stage) {
  std::set<std::string> out;
  for (const ModelParam& param : model.params()) {  // trainable or frozen; row-sparse tables stay whole
    if (param.unit < 0 || (param.flags & LOOM_PARAM_FLAG_SPARSE_ROWS)) continue;
    if (param.unit >= static_cast<int64_t>(stage_of_layer.size()))
      throw runtime_failure("model " + model.component().name + ": parameter " + param.name + " says it belongs to layer " +
                            std::to_string(param.unit) + ", but the model has " +
                            std::to_string(stage_of_layer.size()) + " (loom_model_attributes.pipeline_layers)");
    if (stage_of_layer[static_cast<size_t>(param.unit)] != stage) out.insert(param.name);
  }
  return out;
}

void use_chained_frozen_checksum(ModelInstance& model, Communicator& pipeline, const std::vector<int>& stage_of_layer,
                                 Communicator* tensor_group) {
  const int stage = pipeline.rank();
  FrozenHasher hash;
  std::set<std::string> frozen;
  int holder = 0, hand_overs = 0;
  at::Tensor state = at::zeros({1}, at::kLong);  // the hash's 64 bits, as one int64
  for (const ModelParam& param : model.params()) {
    if (!param.frozen) continue;
    frozen.insert(param.name);
    const bool in_layer = param.unit >= 0 && !(param.flags & LOOM_PARAM_FLAG_SPARSE_ROWS);
    const int owner = in_layer ? stage_of_layer.at(static_cast<size_t>(param.unit)) : holder;
    if (owner != holder) {
      const int tag = kFirstChecksumTag + hand_overs++;
      if (stage == holder) pipeline.start_send(at::full({1}, static_cast<int64_t>(hash.state()), at::kLong), owner, tag);
      if (stage == owner) {
        pipeline.receive(state, holder, tag);
        hash = FrozenHasher(static_cast<uint64_t>(state.item<int64_t>()));
      }
      holder = owner;
    }
    if (stage != holder) continue;
    // The same tensor on every rank of the stage's tensor group, which all hash it whole.
    hash.add(param.name, tensor_group && param.split.dim >= 0 ? whole_param(param, *tensor_group) : *param.tensor);
  }
  pipeline.wait_sends();
  if (frozen.empty()) return;
  state.fill_(stage == holder ? static_cast<int64_t>(hash.state()) : 0);  // the others add zeros
  pipeline.allreduce_sum(state);
  model.set_frozen(std::move(frozen), FrozenHasher(static_cast<uint64_t>(state.item<int64_t>())).text());
}

StagePlacement::StagePlacement(Pipeline& p, Communicator& pipeline, std::vector<int> stage_of_layer)
    : p_(p), pipeline_(pipeline), stage_of_layer_(std::move(stage_of_layer)) {
  const std::vector<ModelParam> params = p.model.params();
  std::vector<ModelParam> trainable;  // what one process's flat buffers hold, this stage's or not
  for (const ModelParam& param : params)
    if (!param.frozen && !(param.flags & LOOM_PARAM_FLAG_SPARSE_ROWS)) trainable.push_back(param);
  const std::vector<std::string> keys = keys_in_order(trainable, false);
  for (const std::string& key : keys) whole_.push_back({key, {}, 0});
  for (auto it = trainable.rbegin(); it != trainable.rend(); ++it) {
    WholeGroup& g = whole_[static_cast<size_t>(std::find(keys.begin(), keys.end(), group_key(*it->tensor)) - keys.begin())];
    Segment seg{it->name, p.model.whole_shape(*it), 0, -1};
    seg.numel = 1;
    for (const int64_t d : seg.shape) seg.numel *= d;
    if (it->unit >= 0) seg.stage = stage_of_layer_.at(static_cast<size_t>(it->unit));
    g.numel += seg.numel;
    g.segments.push_back(std::move(seg));
  }
  for (const ModelParam& param : params)  // frozen layers: outside the flat buffers, each on its stage
    if (param.frozen && param.unit >= 0 && !(param.flags & LOOM_PARAM_FLAG_SPARSE_ROWS))
      frozen_layers_.push_back({param.name, p.model.whole_shape(param), 0, stage_of_layer_.at(static_cast<size_t>(param.unit))});
  const auto tables = p.flat.segment_tables();
  const auto buffers = p.flat.whole_params();
  const auto placed = p.flat.placed_groups();
  // Per whole group, the local group whose optimizer state carries one process's names: the one
  // outside layers, or, where nothing outside layers trains (LoRA), the stage's layers' own; it
  // sits at the whole group's index (why_stages_hold_whole_model checked the order).
  std::vector<int64_t> donor_of(whole_.size(), -1);
  for (size_t g = 0; g < tables.size(); ++g) {
    const auto key = std::find(keys.begin(), keys.end(), group_key(buffers[g]));
    if (key == keys.end()) throw runtime_failure("pipeline: a flat group of " + group_key(buffers[g]) + " one process lacks");
    const auto whole = static_cast<size_t>(key - keys.begin());
    whole_group_of_local_.push_back(whole);
    if (donor_of[whole] < 0 || !placed[g]) donor_of[whole] = static_cast<int64_t>(g);
    for (const auto& seg : tables[g]) local_place_[seg.name] = {static_cast<int64_t>(g), seg.offset};
  }
  for (size_t w = 0; w < whole_.size(); ++w)
    if (donor_of[w] >= 0 && donor_of[w] != static_cast<int64_t>(w))
      throw runtime_failure("pipeline: this stage's flat groups are not in one process's order");
  // The elementwise states, each with its place among its group's.
  const auto& state = p.optimizer.state();
  std::vector<std::vector<size_t>> of_group(tables.size());
  for (size_t i = 0; i < state.size(); ++i)
    if (state[i].elementwise_group >= 0) of_group.at(static_cast<size_t>(state[i].elementwise_group)).push_back(i);
  whole_state_names_.resize(whole_.size());
  for (size_t g = 0; g < tables.size(); ++g) {
    const size_t whole = whole_group_of_local_[g];
    const auto& names_from = of_group[static_cast<size_t>(donor_of[whole])];
    if (names_from.size() != of_group[g].size())
      throw runtime_failure("optimizer " + p.optimizer.component().name + " keeps " + std::to_string(of_group[g].size()) +
                            " elementwise states for a stage's layers but " + std::to_string(names_from.size()) +
                            " for the rest of the same dtype; stages holding their own layers need the same states "
                            "for both (set pipeline_parallel = 1)");
    for (size_t k = 0; k < of_group[g].size(); ++k)
      states_.push_back({of_group[g][k], g, whole, state[names_from[k]].name});
    if (whole_state_names_[whole].empty())
      for (const size_t i : names_from) whole_state_names_[whole].push_back(state[i].name);
  }
}

std::pair<int64_t, int64_t> StagePlacement::local_place(const std::string& name) const {
  const auto it = local_place_.find(name);
  return it == local_place_.end() ? std::pair<int64_t, int64_t>{-1, 0} : it->second;
}

int64_t StagePlacement::numel_held_by(size_t whole_group, int stage) const {
  int64_t n = 0;
  for (const Segment& seg : whole_[whole_group].segments) n += seg.stage == stage ? seg.numel : 0;
  return n;
}

at::Tensor StagePlacement::pieces_of(size_t whole_group, int stage, const LocalState* state) const {
  std::vector<at::Tensor> pieces;
  const auto buffers = p_.flat.whole_params();
  for (const Segment& seg : whole_[whole_group].segments) {
    if (seg.stage != stage) continue;
    const auto [group, offset] = local_place(seg.name);
    const at::Tensor& from = state ? whole_state(state->index) : buffers.at(static_cast<size_t>(group));
    pieces.push_back(from.narrow(0, offset, seg.numel));
  }
  return at::cat(pieces);
}

std::vector<at::Tensor> StagePlacement::exchange(size_t whole_group, const LocalState* layer_state,
                                                 const at::Tensor& like, int tag) {
  const int rank = pipeline_.rank(), ranks = pipeline_.world_size();
  std::vector<at::Tensor> received(static_cast<size_t>(ranks));
  if (rank != 0) {
    if (numel_held_by(whole_group, rank) > 0) pipeline_.start_send(pieces_of(whole_group, rank, layer_state), 0, tag);
    return received;
  }
  for (int from = 1; from < ranks; ++from) {
    const int64_t n = numel_held_by(whole_group, from);
    if (n == 0) continue;
    received[static_cast<size_t>(from)] = at::empty({n}, like.options());
    pipeline_.receive(received[static_cast<size_t>(from)], from, tag);
  }
  return received;
}

std::map<std::string, at::Tensor> StagePlacement::gather_params(bool with_frozen) {
  at::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> out;
  const auto buffers = p_.flat.whole_params();
  for (size_t w = 0; w < whole_.size(); ++w) {
    const std::vector<at::Tensor> received = exchange(w, nullptr, buffers.at(w), kFirstGatherTag + static_cast<int>(w));
    if (pipeline_.rank() != 0) continue;
    std::vector<int64_t> read(received.size(), 0);
    for (const Segment& seg : whole_[w].segments) {
      if (seg.stage <= 0) continue;
      int64_t& at = read[static_cast<size_t>(seg.stage)];
      out[seg.name] = received[static_cast<size_t>(seg.stage)].narrow(0, at, seg.numel).view(seg.shape);
      at += seg.numel;
    }
  }
  // Frozen layers one by one, in registration order (tags after the groups').
  const std::vector<ModelParam> params = p_.model.params();
  int tag = kFirstGatherTag + static_cast<int>(whole_.size());
  for (const Segment& frozen : frozen_layers_) {
    if (!with_frozen) break;
    const auto param = std::find_if(params.begin(), params.end(), [&](const ModelParam& x) { return x.name == frozen.name; });
    if (frozen.stage == pipeline_.rank() && frozen.stage != 0) pipeline_.start_send(param->tensor->detach(), 0, tag);
    if (pipeline_.rank() == 0 && frozen.stage != 0) {
      out[frozen.name] = at::empty(frozen.shape, param->tensor->options());
      pipeline_.receive(out[frozen.name], frozen.stage, tag);
    }
    ++tag;
  }
  pipeline_.wait_sends();
  return out;
}

const at::Tensor& StagePlacement::whole_state(size_t index) const {
  return index < gathered_.size() && gathered_[index].defined() ? gathered_[index] : *p_.optimizer.state()[index].tensor;
}

void StagePlacement::gather_sharded_state(Communicator* replicas, Communicator* stage_replicas) {
  const auto& state = p_.optimizer.state();
  gathered_.assign(state.size(), at::Tensor());
  const auto sharded = p_.flat.sharded_groups(), placed = p_.flat.placed_groups();
  const auto buffers = p_.flat.param_buffers();  // padded to a multiple of the ranks each is cut among
  const auto whole = p_.flat.whole_params();
  const auto owned = p_.flat.owned_slices();
  at::NoGradGuard no_grad;
  for (const LocalState& st : states_) {
    if (!sharded[st.group]) continue;
    Communicator* over = placed[st.group] ? stage_replicas : replicas;
    const at::Tensor& slice = *state[st.index].tensor;
    at::Tensor all = at::zeros({buffers[st.group].numel()}, slice.options());
    all.narrow(0, owned[st.group].start, owned[st.group].length).copy_(slice);
    if (over) over->allgather_chunks(all);
    gathered_[st.index] = all.narrow(0, 0, whole[st.group].numel());
  }
}

void StagePlacement::save_whole(Snapshot* s, bool sends, Communicator* replicas, Communicator* stage_replicas) {
  if (p_.flat.sharded()) gather_sharded_state(replicas, stage_replicas);
  try {
    if (sends) gather_whole(s);
  } catch (...) {
    gathered_.clear();
    throw;
  }
  gathered_.clear();
}

void StagePlacement::gather_whole(Snapshot* s) {
  // The layers the first stage lacks, as model/<param> (frozen ones when the checkpoint keeps them).
  for (auto& [name, t] : gather_params(p_.store_frozen))
    if (s) s->tensors.emplace_back(kModel + name, cpu_copy(t));
  at::NoGradGuard no_grad;
  const int rank = pipeline_.rank();
  const auto& state = p_.optimizer.state();
  const auto placed = p_.flat.placed_groups();
  int tag = kFirstGatherTag + static_cast<int>(whole_.size() + frozen_layers_.size());
  std::map<std::string, at::Tensor> whole_states;  // one process's elementwise states, by name
  for (size_t w = 0; w < whole_.size(); ++w) {
    // Each elementwise state of the group travels under its whole name.
    for (const std::string& whole_name : whole_state_names_[w]) {
      const LocalState *outside = nullptr, *layers = nullptr;  // this stage's states of that name
      for (const LocalState& st : states_)
        if (st.whole_group == w && st.whole_name == whole_name) (placed[st.group] ? layers : outside) = &st;
      if (!layers && numel_held_by(w, rank) > 0)
        throw runtime_failure("pipeline: this stage's layers have no optimizer state \"" + whole_name + "\"");
      const LocalState* like = outside ? outside : layers;
      if (rank == 0 && !like) throw runtime_failure("pipeline: the first stage keeps no optimizer state \"" + whole_name + "\"");
      const std::vector<at::Tensor> received = exchange(w, layers, like ? *state[like->index].tensor : at::Tensor(), tag++);
      if (rank != 0) continue;
      // The first stage: its own values, then every other stage's, in one process's order.
      std::vector<int64_t> read(received.size(), 0);
      std::vector<at::Tensor> pieces;
      for (const Segment& seg : whole_[w].segments) {
        if (seg.stage > 0) {
          int64_t& at = read[static_cast<size_t>(seg.stage)];
          pieces.push_back(received[static_cast<size_t>(seg.stage)].narrow(0, at, seg.numel));
          at += seg.numel;
          continue;
        }
        const LocalState* own = seg.stage < 0 ? outside : layers;
        const auto [group, offset] = local_place(seg.name);
        if (!own || own->group != static_cast<size_t>(group))
          throw runtime_failure("pipeline: no optimizer state here for " + seg.name);
        pieces.push_back(whole_state(own->index).narrow(0, offset, seg.numel));
      }
      whole_states[whole_name] = cpu_copy(at::cat(pieces));
    }
  }
  pipeline_.wait_sends();
  if (rank != 0) return;
  // This stage's elementwise states (named by its own groups) give way to one process's.
  std::set<std::string> local_names;
  for (const LocalState& st : states_) local_names.insert(kOptimizer + state[st.index].name);
  NamedTensors kept;
  for (auto& [name, t] : s->tensors)
    if (!local_names.count(name)) kept.emplace_back(name, std::move(t));
  for (auto& [name, t] : whole_states) kept.emplace_back(kOptimizer + name, std::move(t));
  s->tensors = std::move(kept);
}

LoadedCheckpoint StagePlacement::cut(LoadedCheckpoint whole, const std::string& origin) const {
  std::vector<const Segment*> layers;  // every layer's weights, trainable or frozen
  for (const WholeGroup& g : whole_)
    for (const Segment& seg : g.segments) layers.push_back(&seg);
  for (const Segment& seg : frozen_layers_) layers.push_back(&seg);
  for (const Segment* seg : layers) {
    if (seg->stage < 0 || seg->stage == pipeline_.rank()) continue;
    const auto it = whole.tensors.find(kModel + seg->name);
    if (it == whole.tensors.end()) continue;  // restore_tensors names what is missing
    if (it->second.sizes().vec() != seg->shape)
      throw runtime_failure(origin + ": \"" + it->first + "\" has another shape in the checkpoint than in this "
                            "model; resume with the manifest that wrote it");
    whole.tensors.erase(it);  // another stage's layer
  }
  const auto& state = p_.optimizer.state();
  const auto tables = p_.flat.segment_tables();
  const SegmentTables whole_layout = whole_tables();
  std::map<std::string, at::Tensor> mine;
  for (const LocalState& st : states_) {
    const auto it = whole.tensors.find(kOptimizer + st.whole_name);
    if (it == whole.tensors.end())
      throw runtime_failure(origin + ": the checkpoint has no \"" + kOptimizer + st.whole_name +
                            "\"; resume with the manifest that wrote it");
    const WholeGroup& g = whole_[st.whole_group];
    if (it->second.dim() != 1 || it->second.numel() != g.numel)
      throw runtime_failure(origin + ": \"" + it->first + "\" follows " + std::to_string(it->second.numel()) +
                            " parameters in the checkpoint, but " + std::to_string(g.numel) +
                            " in this run; resume with the manifest that wrote it");
    std::map<std::string, int64_t> whole_offset;
    for (const auto& seg : whole_layout[st.whole_group]) whole_offset[seg.name] = seg.offset;
    std::vector<at::Tensor> pieces;  // this stage's group, in its own order
    for (const auto& seg : tables.at(st.group))
      pieces.push_back(it->second.narrow(0, whole_offset.at(seg.name), seg.numel));
    mine[kOptimizer + state[st.index].name] =
        pieces.empty() ? at::empty({0}, it->second.options()) : at::cat(pieces);
  }
  for (const LocalState& st : states_) whole.tensors.erase(kOptimizer + st.whole_name);
  for (auto& [name, t] : mine) whole.tensors[name] = std::move(t);
  return whole;
}

SegmentTables StagePlacement::whole_tables() const {
  SegmentTables out;
  for (const WholeGroup& g : whole_) {
    out.emplace_back();
    int64_t offset = 0;
    for (const Segment& seg : g.segments) out.back().push_back({seg.name, std::exchange(offset, offset + seg.numel), seg.numel, seg.shape});
  }
  return out;
}

std::string StagePlacement::describe() const {
  int64_t held = 0, all = 0, outside = 0;
  for (const WholeGroup& g : whole_)
    for (const Segment& seg : g.segments) {
      all += seg.numel;
      if (seg.stage < 0) ++outside;
      if (seg.stage < 0 || seg.stage == pipeline_.rank()) held += seg.numel;
    }
  std::string out = std::to_string(held) + " of " + std::to_string(all) + " trainable parameters (its layers' and " +
                    std::to_string(outside) + " tensor" + (outside == 1 ? "" : "s") + " outside layers)";
  if (!p_.flat.sharded()) return out;
  int64_t updated = 0;  // its slices: the elements its optimizer keeps state for
  for (const OwnedSlice& slice : p_.flat.owned_slices()) updated += slice.length;
  return out + ", of which this rank's optimizer updates " + std::to_string(updated) + " (shard = \"" +
         shard_mode_name(p_.flat.shard().mode) + "\")";
}

}  // namespace loom
