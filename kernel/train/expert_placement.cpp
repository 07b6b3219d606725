#include "train/expert_placement.hpp"

#include <nlohmann/json.hpp>

#include <set>

#include "base/failure.hpp"
#include "checkpoint/sharded_checkpoint.hpp"
#include "train/frozen_params.hpp"

namespace loom {
namespace {

const std::string kModel = "model/", kOptimizer = "optimizer/";

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::set<std::string> experts_held_elsewhere(ModelInstance& model, Communicator& group) {
  nlohmann::json mine = nlohmann::json::array();
  for (const ModelParam& param : model.params())
    if (param.expert()) mine.push_back(param.name);
  std::set<std::string> out;
  const std::vector<std::string> said = group.allgather_bytes(mine.dump());
  for (size_t r = 0; r < said.size(); ++r)
    if (static_cast<int>(r) != group.rank())
      for (const auto& name : nlohmann::json::parse(said[r])) out.insert(name.get<std::string>());
  return out;
}

ExpertPlacement::ExpertPlacement(Pipeline& p, Communicator& group) : p_(p), group_(group) {
  const std::vector<ModelParam> params = p.model.params();
  const auto tables = p.flat.segment_tables();
  const auto expert_groups = p.flat.placed_groups();
  std::map<std::string, int64_t> group_of;  // flat group of each expert in the buffers
  for (size_t g = 0; g < tables.size(); ++g)
    for (const auto& seg : tables[g]) group_of[seg.name] = expert_groups[g] ? static_cast<int64_t>(g) : -1;
  // Runs: experts registered one after another; what each rank says of its own.
  nlohmann::json mine = nlohmann::json::array();
  size_t run = 0;
  bool in_run = false;
  for (const ModelParam& param : params) {
    if (!param.expert()) {
      run += in_run ? 1 : 0;
      in_run = false;
      continue;
    }
    in_run = true;
    local_index_[param.name] = local_.size();
    local_.push_back(param.name);
    run_of_local_.push_back(run);
    const auto g = group_of.find(param.name);
    mine.push_back({param.name, param.tensor->sizes().vec(), run, g == group_of.end() ? -1 : g->second});
    in_buffers_.push_back(g != group_of.end());
    frozen_experts_ = frozen_experts_ || g == group_of.end();
  }
  const std::vector<std::string> said = group.allgather_bytes(mine.dump());
  std::vector<nlohmann::json> ranks;
  for (size_t r = 0; r < said.size(); ++r) {
    ranks.push_back(nlohmann::json::parse(said[r]));
    bool same = ranks.back().size() == mine.size();
    for (size_t i = 0; same && i < mine.size(); ++i)  // shape, run and group alike; the name differs
      for (size_t field = 1; field < 4; ++field) same = same && ranks.back()[i][field] == mine[i][field];
    if (!same)
      throw runtime_failure("[distributed] expert_parallel: expert rank " + std::to_string(r) + " holds other experts "
                            "(count, shapes or frozen ones) than expert rank " + std::to_string(group.rank()) +
                            "; every rank must hold an equal share laid out alike (freeze whole layers' experts, "
                            "not single experts)");
  }
  const size_t runs = run_of_local_.empty() ? 0 : run_of_local_.back() + 1;
  for (size_t k = 0; k < runs; ++k)
    for (size_t r = 0; r < ranks.size(); ++r)
      for (size_t i = 0; i < local_.size(); ++i)
        if (run_of_local_[i] == k)
          whole_.push_back({ranks[r][i][0].get<std::string>(), ranks[r][i][1].get<std::vector<int64_t>>(),
                            static_cast<int>(r), i});
  // Each expert group: this rank's offsets (the same at every rank) and one process's layout,
  // the reverse of the whole registration order (train/flat_params.hpp).
  for (size_t g = 0; g < tables.size(); ++g) {
    if (!expert_groups[g]) continue;
    GroupLayout layout;
    layout.group = g;
    layout.local_offset.assign(local_.size(), -1);
    for (const auto& seg : tables[g]) {
      layout.local_offset[local_index_.at(seg.name)] = seg.offset;
      layout.local_numel += seg.numel;
    }
    layout.whole_offset.assign(whole_.size(), -1);
    for (size_t e = whole_.size(); e-- > 0;) {
      if (layout.local_offset[whole_[e].local] < 0) continue;
      layout.whole_offset[e] = layout.whole_numel;
      layout.whole_numel += numel_of(whole_[e].shape);
    }
    groups_.push_back(std::move(layout));
  }
}

at::Tensor ExpertPlacement::gather_flat(const at::Tensor& local, const GroupLayout& g) {
  const int64_t n = g.local_numel;
  at::Tensor all = at::empty({group_.world_size() * n}, local.options());
  all.narrow(0, group_.rank() * n, n).copy_(local.reshape({-1}));
  group_.allgather_chunks(all);
  at::Tensor whole = at::empty({g.whole_numel}, local.options());
  for (size_t e = 0; e < whole_.size(); ++e) {
    if (g.whole_offset[e] < 0) continue;
    const Expert& x = whole_[e];
    const int64_t numel = numel_of(x.shape);
    whole.narrow(0, g.whole_offset[e], numel).copy_(all.narrow(0, x.owner * n + g.local_offset[x.local], numel));
  }
  return whole;
}

at::Tensor ExpertPlacement::cut_flat(const at::Tensor& whole, const GroupLayout& g, const std::string& what,
                                     const std::string& origin) const {
  if (whole.dim() != 1 || whole.numel() != g.whole_numel)
    throw runtime_failure(origin + ": \"" + what + "\" holds " + std::to_string(whole.numel()) + " elements, but this " +
                          "model's experts are " + std::to_string(g.whole_numel) + "; resume with the manifest that "
                          "wrote it");
  at::Tensor local = at::empty({g.local_numel}, whole.options());
  for (size_t e = 0; e < whole_.size(); ++e) {
    const Expert& x = whole_[e];
    if (g.whole_offset[e] < 0 || x.owner != group_.rank()) continue;
    const int64_t numel = numel_of(x.shape);
    local.narrow(0, g.local_offset[x.local], numel).copy_(whole.narrow(0, g.whole_offset[e], numel));
  }
  return local;
}

std::vector<at::Tensor> ExpertPlacement::gather_tensors(const std::vector<at::Tensor>& mine) {
  // One all-gather per dtype: the experts of that dtype, flattened, in local order.
  std::vector<at::Tensor> out(whole_.size());
  std::map<at::ScalarType, std::vector<size_t>> by_dtype;
  for (size_t i = 0; i < mine.size(); ++i) by_dtype[mine[i].scalar_type()].push_back(i);
  for (const auto& [dtype, items] : by_dtype) {
    std::vector<at::Tensor> flat;
    std::map<size_t, int64_t> offset;  // local index -> its place in a rank's chunk
    int64_t n = 0;
    for (size_t i : items) {
      flat.push_back(mine[i].detach().to(at::kCPU).reshape({-1}));
      offset[i] = n;
      n += mine[i].numel();
    }
    at::Tensor all = at::empty({group_.world_size() * n}, flat.front().options());
    all.narrow(0, group_.rank() * n, n).copy_(at::cat(flat));
    group_.allgather_chunks(all);
    for (size_t e = 0; e < whole_.size(); ++e) {
      const auto it = offset.find(whole_[e].local);
      if (it == offset.end()) continue;
      out[e] = all.narrow(0, whole_[e].owner * n + it->second, numel_of(whole_[e].shape)).view(whole_[e].shape).clone();
    }
  }
  return out;
}

std::map<std::string, at::Tensor> ExpertPlacement::gather_params() {
  std::map<std::string, const ModelParam*> by_name;
  const std::vector<ModelParam> params = p_.model.params();
  for (const ModelParam& param : params) by_name[param.name] = &param;
  std::vector<at::Tensor> mine;
  for (const std::string& name : local_) mine.push_back(*by_name.at(name)->tensor);
  const std::vector<at::Tensor> all = gather_tensors(mine);
  std::map<std::string, at::Tensor> out;
  for (size_t e = 0; e < whole_.size(); ++e) out[whole_[e].name] = all[e];
  return out;
}

std::string ExpertPlacement::describe() const {
  int64_t mine = 0, all = 0;
  for (const Expert& x : whole_) {
    all += numel_of(x.shape);
    if (x.owner == group_.rank()) mine += numel_of(x.shape);
  }
  return "its " + std::to_string(local_.size()) + " of " + std::to_string(whole_.size()) + " expert weights (" +
         std::to_string(mine) + " of " + std::to_string(all) + " elements)";
}

const ExpertPlacement::GroupLayout* ExpertPlacement::layout_of_state(const std::string& state) const {
  for (const auto& st : p_.optimizer.state()) {
    if (st.name != state || st.elementwise_group < 0) continue;
    for (const GroupLayout& g : groups_)
      if (g.group == static_cast<size_t>(st.elementwise_group)) return &g;
  }
  return nullptr;
}

void ExpertPlacement::gather_whole(Snapshot& s) {
  std::set<size_t> saved;  // local experts the capture holds (frozen ones only when stored)
  NamedTensors kept;
  for (auto& [name, t] : s.tensors) {
    if (name.rfind(kModel, 0) == 0 && local_index_.count(name.substr(kModel.size()))) {
      saved.insert(local_index_.at(name.substr(kModel.size())));
      continue;  // every rank's come back below
    }
    if (name.rfind(kOptimizer, 0) == 0)
      if (const GroupLayout* g = layout_of_state(name.substr(kOptimizer.size()))) t = gather_flat(t, *g);
    kept.emplace_back(name, t);
  }
  const std::map<std::string, at::Tensor> all = gather_params();
  for (const Expert& x : whole_)
    if (saved.count(x.local)) kept.emplace_back(kModel + x.name, all.at(x.name).contiguous());
  s.tensors = std::move(kept);
}

void ExpertPlacement::gather_part(Snapshot& part, bool first_part) {
  nlohmann::json metadata = nlohmann::json::parse(part.metadata_json);
  const auto whole_or_none = [&](const at::Tensor& whole) {
    return first_part ? whole : at::empty({0}, whole.options());
  };
  for (auto& [name, t] : part.tensors) {
    for (const GroupLayout& g : groups_)
      if (name == kShardParamsPrefix + std::to_string(g.group)) t = whole_or_none(gather_flat(t, g));
    if (name.rfind(kShardOptimizerPrefix, 0) == 0)
      if (const GroupLayout* g = layout_of_state(name.substr(std::string(kShardOptimizerPrefix).size())))
        t = whole_or_none(gather_flat(t, *g));
  }
  for (const GroupLayout& g : groups_) {  // slices that tile: all of it in the first part, none after
    metadata["part"]["slices"][g.group] = {first_part ? 0 : g.whole_numel, first_part ? g.whole_numel : 0};
    if (!metadata.contains("shard")) continue;
    nlohmann::json segments = nlohmann::json::array();
    for (size_t e = whole_.size(); e-- > 0;)
      if (g.whole_offset[e] >= 0)
        segments.push_back({whole_[e].name, g.whole_offset[e], numel_of(whole_[e].shape), whole_[e].shape});
    metadata["shard"]["groups"][g.group]["numel"] = g.whole_numel;
    metadata["shard"]["groups"][g.group]["segments"] = segments;
  }
  // Frozen experts stored whole ([checkpoint] frozen = "include") are outside the buffers; the
  // first part holds the frozen weights.
  if (p_.store_frozen && frozen_experts_) {
    const std::map<std::string, at::Tensor> all = gather_params();
    if (first_part) {
      NamedTensors kept;
      for (auto& [name, t] : part.tensors)
        if (name.rfind(kModel, 0) != 0 || !local_index_.count(name.substr(kModel.size()))) kept.emplace_back(name, t);
      for (const Expert& x : whole_)
        if (!in_buffers_[x.local]) kept.emplace_back(kModel + x.name, all.at(x.name).contiguous());
      part.tensors = std::move(kept);
    }
  }
  part.metadata_json = metadata.dump();
}

LoadedCheckpoint ExpertPlacement::cut(LoadedCheckpoint whole, const std::string& origin) const {
  for (const Expert& x : whole_)
    if (!local_index_.count(x.name)) whole.tensors.erase(kModel + x.name);  // another rank's
  for (auto& [name, t] : whole.tensors)
    if (name.rfind(kOptimizer, 0) == 0)
      if (const GroupLayout* g = layout_of_state(name.substr(kOptimizer.size()))) t = cut_flat(t, *g, name, origin);
  return whole;
}

void ExpertPlacement::use_whole_frozen_checksum() {
  const std::vector<ModelParam> params = p_.model.params();
  std::set<std::string> frozen;
  for (const ModelParam& param : params)
    if (param.frozen) frozen.insert(param.name);
  if (frozen.empty()) return;
  std::map<std::string, at::Tensor> experts = gather_params();
  std::map<std::string, bool> expert_frozen;
  for (size_t i = 0; i < local_.size(); ++i) expert_frozen[local_[i]] = frozen.count(local_[i]) > 0;
  // One process's order: each run of this rank's experts stands for the whole run.
  std::vector<ModelParam> ordered;
  std::set<std::string> whole_frozen = frozen;
  size_t next_run = 0;
  for (const ModelParam& param : params) {
    if (!param.expert()) {
      ordered.push_back(param);
      continue;
    }
    const size_t i = local_index_.at(param.name);
    if (run_of_local_[i] < next_run) continue;
    next_run = run_of_local_[i] + 1;
    for (const Expert& x : whole_) {
      if (run_of_local_[x.local] != run_of_local_[i]) continue;
      ModelParam copy = param;
      copy.name = x.name;
      copy.tensor = &experts.at(x.name);
      ordered.push_back(copy);
      if (expert_frozen.at(local_[x.local])) whole_frozen.insert(x.name);
    }
  }
  p_.model.set_frozen(std::move(frozen), frozen_checksum(ordered, whole_frozen));
}

}  // namespace loom
