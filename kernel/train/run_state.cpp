#include "train/run_state.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

#include "base/failure.hpp"
#include "checkpoint/checkpoint_index.hpp"
#include "checkpoint/sharded_checkpoint.hpp"
#include "checkpoint/tensor_pieces.hpp"

namespace loom {

at::Tensor cpu_copy(const at::Tensor& t) {
  return t.detach().to(at::kCPU, t.scalar_type(), /*non_blocking=*/false, /*copy=*/true).contiguous();
}

namespace {

constexpr int kMetadataVersion = 1;
const char* const kFrozenChecksumKey = "frozen_checksum";

at::Tensor bytes_tensor(const std::string& bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

std::string tensor_bytes(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

const at::Tensor& require(const LoadedCheckpoint& loaded, const std::string& name, const std::string& origin) {
  auto it = loaded.tensors.find(name);
  if (it == loaded.tensors.end())
    throw runtime_failure(origin + ": checkpoint has no tensor \"" + name +
                          "\"; it was written by a different model or optimizer configuration");
  return it->second;
}

std::string describe(const at::Tensor& t) {
  std::ostringstream out;
  out << c10::toString(t.scalar_type()) << t.sizes();
  return out.str();
}

void copy_into(at::Tensor& live, const at::Tensor& saved, const std::string& name, const std::string& origin) {
  if (live.sizes() != saved.sizes() || live.scalar_type() != saved.scalar_type())
    throw runtime_failure(origin + ": \"" + name + "\" is " + describe(saved) + " in the checkpoint but " +
                          describe(live) + " in this run; resume with the manifest that wrote it");
  at::NoGradGuard no_grad;
  live.detach().copy_(saved);
}

// Where the model lives: the device of its parameters (the run's device).
at::Device model_device(Pipeline& p) {
  const auto params = p.model.params();
  return params.empty() ? at::Device(at::kCPU) : params.front().tensor->device();
}

// "hooks[0]/early_stop": a component's state, found again by slot and name.
template <class Instance>
std::string state_name(const Instance& instance) {
  return instance.slot() + "/" + instance.component().name;
}

}  // namespace

namespace {

// What every checkpoint holds besides weights and optimizer state: RNG, data positions, the
// state of hooks and trackers.
void add_run_state(Snapshot& s, Pipeline& p, const std::vector<std::string>& data_states) {
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    s.tensors.emplace_back("rng/cpu", cpu_copy(at::Tensor(gen.get_state())));
  }
  if (const at::Device device = model_device(p); device.is_cuda()) {  // dropout on the GPU draws from it
    at::Generator gen = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    s.tensors.emplace_back("rng/cuda", cpu_copy(at::Tensor(gen.get_state())));
  }
  for (size_t r = 0; r < data_states.size(); ++r)
    s.tensors.emplace_back("data/rank" + std::to_string(r), bytes_tensor(data_states[r]));
  for (size_t i = 0; i < p.hooks.size(); ++i)
    if (p.hooks[i].has_state()) s.tensors.emplace_back(state_name(p.hooks[i]), bytes_tensor(p.hooks[i].save_state()));
  for (size_t i = 0; i < p.trackers.size(); ++i)
    if (p.trackers[i].has_state())
      s.tensors.emplace_back(state_name(p.trackers[i]), bytes_tensor(p.trackers[i].save_state()));
}

nlohmann::json run_metadata(const Pipeline& p, const Progress& progress, size_t world_size,
                            const std::string& resolved_manifest) {
  nlohmann::json out = {{"format", "loom-checkpoint"},
          {"version", kMetadataVersion},
          {"step", progress.step},
          {"tokens", progress.tokens},
          {"epoch", progress.epoch},
          {"elapsed_s", progress.elapsed_s},
          {"world_size", world_size},
          {"manifest", resolved_manifest}};
  // Frozen weights left out ([checkpoint] frozen = "reference"): what a resume must rebuild.
  if (!p.model.frozen_checksum().empty() && !p.store_frozen) out[kFrozenChecksumKey] = p.model.frozen_checksum();
  return out;
}

// sharded_checkpoint.hpp's layout: what a reader needs to put the ranks' slices together.
nlohmann::json shard_layout(Pipeline& p) {
  nlohmann::json groups = nlohmann::json::array();
  const auto whole = p.flat.whole_params();
  const auto tables = p.flat.segment_tables();
  for (size_t g = 0; g < whole.size(); ++g) {
    nlohmann::json segments = nlohmann::json::array();
    for (const auto& seg : tables[g]) segments.push_back({seg.name, seg.offset, seg.numel, seg.shape});
    groups.push_back({{"dtype", c10::toString(whole[g].scalar_type())}, {"numel", whole[g].numel()}, {"segments", segments}});
  }
  nlohmann::json elementwise = nlohmann::json::object();
  for (const auto& st : p.optimizer.state())
    if (st.elementwise_group >= 0) elementwise[st.name] = st.elementwise_group;
  return {{"mode", shard_mode_name(p.flat.shard().mode)},
          {"world_size", p.flat.shard().world_size},
          {"groups", groups},
          {"elementwise", elementwise}};
}

// An elementwise state tensor's group, checked against the live layout.
size_t state_group(Pipeline& p, const OptimizerInstance::StateTensor& st) {
  const auto slices = p.flat.owned_slices();
  const auto g = static_cast<size_t>(st.elementwise_group);
  if (g >= slices.size() || st.tensor->dim() != 1 || st.tensor->numel() != slices[g].length)
    throw runtime_failure("optimizer " + p.optimizer.component().name + ": state \"" + st.name +
                          "\" is declared elementwise over group " + std::to_string(st.elementwise_group) +
                          " but is not a 1-D tensor of that group's " + std::to_string(g < slices.size() ? slices[g].length : 0) +
                          " elements; fix the plugin's add_elementwise_state call");
  return g;
}

}  // namespace

Snapshot capture_snapshot(Pipeline& p, const Progress& progress, const std::vector<std::string>& data_states,
                          const std::string& resolved_manifest) {
  Snapshot s;
  s.step = progress.step;
  for (const ModelParam& param : p.model.params())  // another stage's layers: train/stage_placement.hpp
    if ((!param.frozen || p.store_frozen) && !param.elsewhere) s.tensors.emplace_back("model/" + param.name, cpu_copy(*param.tensor));
  for (const auto& st : p.optimizer.state()) s.tensors.emplace_back("optimizer/" + st.name, cpu_copy(*st.tensor));
  if (p.sparse_optimizer)  // per-row state, the same on every rank
    for (const auto& st : p.sparse_optimizer->state())
      s.tensors.emplace_back(kSparseOptimizerPrefix + st.name, cpu_copy(*st.tensor));
  add_run_state(s, p, data_states);
  s.metadata_json = run_metadata(p, progress, data_states.size(), resolved_manifest).dump();
  return s;
}

Snapshot capture_shard_part(Pipeline& p, const Progress& progress, const std::vector<std::string>& data_states,
                            const std::string& resolved_manifest) {
  const int rank = p.flat.shard().rank;
  Snapshot s;
  s.step = progress.step;
  const auto whole = p.flat.whole_params();
  const auto owned = p.flat.owned_slices();
  nlohmann::json slices = nlohmann::json::array();
  for (size_t g = 0; g < whole.size(); ++g) {
    s.tensors.emplace_back(kShardParamsPrefix + std::to_string(g),
                           cpu_copy(whole[g].narrow(0, owned[g].start, owned[g].length)));
    slices.push_back({owned[g].start, owned[g].length});
  }
  for (const auto& st : p.optimizer.state()) {
    if (st.elementwise_group >= 0) {
      state_group(p, st);
      s.tensors.emplace_back(kShardOptimizerPrefix + st.name, cpu_copy(*st.tensor));
    } else if (rank == 0) {  // the same on every rank: saved once
      s.tensors.emplace_back("optimizer/" + st.name, cpu_copy(*st.tensor));
    }
  }
  nlohmann::json metadata = {{"format", "loom-checkpoint-part"}};
  if (rank == 0) {
    add_run_state(s, p, data_states);
    metadata = run_metadata(p, progress, data_states.size(), resolved_manifest);
    if (p.store_frozen)  // frozen weights are outside the flat buffers: whole, once
      for (const ModelParam& param : p.model.params())
        if (param.frozen) s.tensors.emplace_back("model/" + param.name, cpu_copy(*param.tensor));
    metadata["shard"] = shard_layout(p);
  }
  metadata["part"] = {{"rank", rank}, {"slices", slices}};
  s.metadata_json = metadata.dump();
  return s;
}

RestoredRun read_restored_run(const LoadedCheckpoint& loaded, const std::string& origin) {
  RestoredRun out;
  try {
    const nlohmann::json m = nlohmann::json::parse(loaded.metadata_json);
    if (m.at("format") != "loom-checkpoint") throw std::runtime_error("not a Loom checkpoint");
    // json_integer refuses floats: nlohmann would convert 1e30 to an int unchecked.
    if (json_integer(m.at("version"), "the metadata version") > kMetadataVersion)
      throw std::runtime_error("written by a newer Loom (metadata version " + m.at("version").dump() + ")");
    out.step = json_integer(m.at("step"), "the step");
    out.tokens = json_integer(m.at("tokens"), "the token count");
    out.epoch = m.contains("epoch") ? json_integer(m.at("epoch"), "the epoch") : 0;  // checkpoints from before epochs: 0
    if (!m.at("elapsed_s").is_number()) throw std::runtime_error("elapsed_s is not a number");
    out.elapsed_s = m.at("elapsed_s").get<double>();
    const int64_t world_size = json_integer(m.at("world_size"), "the world size");
    out.resolved_manifest = m.at("manifest").get<std::string>();
    // Counters from a file someone handed over: in range, and the step the folder says.
    constexpr int64_t kMaxCount = int64_t(1) << 53;
    if (out.step < 0 || out.step > kMaxCount) throw std::runtime_error("step " + std::to_string(out.step) + " is out of range");
    if (out.tokens < 0 || out.tokens > kMaxCount) throw std::runtime_error("token count " + std::to_string(out.tokens) + " is out of range");
    if (out.epoch < 0 || out.epoch > kMaxCount) throw std::runtime_error("epoch " + std::to_string(out.epoch) + " is out of range");
    if (!std::isfinite(out.elapsed_s) || out.elapsed_s < 0) throw std::runtime_error("elapsed time " + m.at("elapsed_s").dump() + " is not a time");
    if (world_size < 1 || world_size > 65536) throw std::runtime_error("world size " + std::to_string(world_size) + " is out of range");
    out.world_size = static_cast<int>(world_size);
    if (const auto named = checkpoint_step_of(origin); named && *named != out.step)
      throw std::runtime_error("it says step " + std::to_string(out.step) + " but its folder is step-" + std::to_string(*named));
  } catch (const std::exception& e) {
    throw usage_failure(origin + ": unreadable checkpoint metadata: " + e.what());
  }
  for (int r = 0; r < out.world_size; ++r)
    out.data_states.push_back(tensor_bytes(require(loaded, "data/rank" + std::to_string(r), origin)));
  return out;
}

namespace {

// The checksum a checkpoint recorded for the frozen weights it left out; "" when it has none.
std::string recorded_frozen_checksum(const LoadedCheckpoint& loaded) {
  const nlohmann::json m = nlohmann::json::parse(loaded.metadata_json, nullptr, /*allow_exceptions=*/false);
  if (!m.is_object() || !m.contains(kFrozenChecksumKey) || !m[kFrozenChecksumKey].is_string()) return "";
  return m[kFrozenChecksumKey].get<std::string>();
}

bool leaves_out_model_tensors(ModelInstance& model, const LoadedCheckpoint& loaded) {
  for (const ModelParam& param : model.params())
    if (!loaded.tensors.count("model/" + param.name)) return true;
  return false;
}

}  // namespace

void restore_model(ModelInstance& model, const LoadedCheckpoint& loaded, const std::string& origin) {
  bool left_out = false;
  for (const ModelParam& param : model.params()) {
    if (param.elsewhere) continue;  // another pipeline stage's layer
    const std::string name = "model/" + param.name;
    if (param.frozen && !loaded.tensors.count(name)) {
      left_out = true;
      continue;
    }
    copy_into(*param.tensor, require(loaded, name, origin), name, origin);
  }
  if (!left_out) return;
  // The frozen weights come from the model's source, as when the checkpoint was written.
  const std::string recorded = recorded_frozen_checksum(loaded);
  const std::string& now = model.frozen_checksum();
  if (recorded.empty())
    throw usage_failure(origin + ": the checkpoint holds no frozen weights and no checksum of them; resume with "
                        "the manifest that wrote it");
  if (recorded != now)
    throw usage_failure(origin + ": the frozen weights rebuilt from the model's source (its from folder, "
                        "[model] init_from and seed) have checksum " + now + ", not the " + recorded +
                        " the checkpoint recorded: the source changed since. Point the manifest at the same "
                        "weights, or save with [checkpoint] frozen = \"include\" next time");
}

void prepare_for_restore(ModelInstance& model, const RunPlan& plan, const LoadedCheckpoint& loaded) {
  if (leaves_out_model_tensors(model, loaded)) prepare_model(model, plan);
  else freeze_parameters(model, plan);
}

std::vector<std::string> nonfinite_tensors(const LoadedCheckpoint& loaded, const std::vector<std::string>& prefixes) {
  std::vector<std::string> out;
  for (const auto& [name, t] : loaded.tensors) {
    const bool wanted = std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return name.rfind(p, 0) == 0; });
    if (!wanted || !at::isFloatingType(t.scalar_type()) || t.numel() == 0) continue;
    const int64_t bad = (~at::isfinite(t)).sum().item<int64_t>();
    if (bad > 0) out.push_back(name + " (" + std::to_string(bad) + " of " + std::to_string(t.numel()) + ")");
  }
  return out;
}

namespace {

std::string first_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 5; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 5) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

// Refuses (or, when allowed, names in a warning) what the checkpoint holds that this run does
// not restore: silently dropping optimizer state would resume with fresh moments.
void check_all_claimed(Pipeline& p, const LoadedCheckpoint& loaded, const std::set<std::string>& claimed,
                       const std::string& origin, bool allow_unclaimed) {
  std::vector<std::string> unclaimed, dropped_state;
  for (const auto& [name, t] : loaded.tensors) {
    if (claimed.count(name) || name == "rng/cuda") continue;  // rng/cuda: a GPU run resumed on the CPU
    // Trackers live on rank 0 only (unless every_rank), so their state is not everyone's.
    if (name.rfind("trackers[", 0) == 0) continue;
    (name.rfind("hooks[", 0) == 0 ? dropped_state : unclaimed).push_back(name);
  }
  if (!dropped_state.empty())
    spdlog::warn("{}: state of components no longer in the manifest is dropped: {}", origin, first_names(dropped_state));
  if (unclaimed.empty()) return;
  if (allow_unclaimed) {
    spdlog::warn("{}: [checkpoint] allow_unclaimed: these tensors are not restored: {}", origin, first_names(unclaimed));
    return;
  }
  throw usage_failure(origin + ": the checkpoint holds tensors nothing in this run restores: " + first_names(unclaimed) +
                      " (model " + p.model.component().name + ", optimizer " + p.optimizer.component().name +
                      "); resume with the manifest that wrote it, or set [checkpoint] allow_unclaimed = true to drop "
                      "them on purpose");
}

}  // namespace

void restore_tensors(Pipeline& p, const LoadedCheckpoint& loaded, const std::string& origin, const RestoreRules& rules) {
  if (!rules.allow_nonfinite) {
    const std::vector<std::string> bad = nonfinite_tensors(loaded, {"model/", "optimizer/", kSparseOptimizerPrefix});
    if (!bad.empty())
      throw usage_failure(origin + ": NaN or infinite values in " + first_names(bad) +
                          "; resume from an earlier checkpoint, or set [checkpoint] allow_nonfinite = true to load "
                          "them anyway");
  }
  std::set<std::string> claimed = {"rng/cpu"};
  for (const auto& [name, t] : loaded.tensors)
    if (name.rfind("data/rank", 0) == 0) claimed.insert(name);  // read_restored_run took them
  restore_model(p.model, loaded, origin);
  for (const ModelParam& param : p.model.params()) claimed.insert("model/" + param.name);
  for (const auto& st : p.optimizer.state()) {
    const std::string name = "optimizer/" + st.name;
    claimed.insert(name);
    const at::Tensor& saved = require(loaded, name, origin);
    if (st.elementwise_group < 0) {
      copy_into(*st.tensor, saved, name, origin);
      continue;
    }
    // Whole in the checkpoint (consolidated if it was sharded): this rank takes its slice.
    const size_t g = state_group(p, st);
    const OwnedSlice slice = p.flat.owned_slices()[g];
    const int64_t group_numel = p.flat.whole_params()[g].numel();
    if (saved.dim() != 1 || saved.numel() != group_numel)
      throw runtime_failure(origin + ": \"" + name + "\" is " + describe(saved) + " in the checkpoint but follows " +
                            std::to_string(group_numel) + " parameters in this run; resume with the manifest that wrote it");
    copy_into(*st.tensor, saved.narrow(0, slice.start, slice.length), name, origin);
  }
  if (p.sparse_optimizer)
    for (const auto& st : p.sparse_optimizer->state()) {
      const std::string name = kSparseOptimizerPrefix + st.name;
      claimed.insert(name);
      copy_into(*st.tensor, require(loaded, name, origin), name, origin);
    }
  check_all_claimed(p, loaded, claimed, origin, rules.allow_unclaimed);
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(require(loaded, "rng/cpu", origin));
  }
  // A checkpoint written on a GPU resumes on the CPU (its rng/cuda is not needed there) and
  // the reverse (the GPU generator keeps its seed-derived state).
  if (const at::Device device = model_device(p); device.is_cuda()) {
    if (auto it = loaded.tensors.find("rng/cuda"); it != loaded.tensors.end()) {
      at::Generator gen = at::globalContext().defaultGenerator(device);
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(it->second);
    }
  }
  // Hooks and trackers added since the checkpoint simply start fresh.
  for (auto& hook : p.hooks)
    if (auto it = loaded.tensors.find(state_name(hook)); hook.has_state() && it != loaded.tensors.end())
      hook.load_state(tensor_bytes(it->second));
  for (auto& tracker : p.trackers)
    if (auto it = loaded.tensors.find(state_name(tracker)); tracker.has_state() && it != loaded.tensors.end())
      tracker.load_state(tensor_bytes(it->second));
}

}  // namespace loom
