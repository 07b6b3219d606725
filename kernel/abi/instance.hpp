// instance.hpp: the host's owner of one plugin-created object. It creates the object through
// the kind's vtable, destroys it with the same module's destroy, and turns every returned
// status into a Failure that names the slot, the component and the plugin file.
#pragma once

#include <loom/abi.h>

#include <string>
#include <utility>
#include <vector>

#include "abi/host_api.hpp"
#include "abi/option_spec.hpp"
#include "abi/registry.hpp"
#include "base/failure.hpp"

namespace loom {

// One manifest slot's choice: the component and its resolved options.
struct SlotConfig {
  std::string slot;                  // "model", "trackers[0]"
  const Component* component = nullptr;
  loom_config config;                // resolved options
  bool required = true;              // trackers: false (the default) turns failures into warnings
  bool every_rank = false;           // trackers: also on ranks other than 0 ([[trackers]] every_rank)
};

// [lora]: the adapters the model adds to its linear layers (loom_adapter_spec, ABI 1.8).
struct AdapterSettings {
  bool enabled = false;              // the manifest has a [lora] table
  std::vector<std::string> targets;  // module names (PEFT's target_modules)
  int64_t rank = 8;
  double alpha = 16;
  double dropout = 0;
  double scale() const { return alpha / static_cast<double>(rank); }  // what B A x is multiplied by
};

// What every component instance learns about the run.
struct RunContext {
  std::string run_dir, device;
  uint64_t seed = 0;
  int32_t rank = 0, world_size = 1;  // data-parallel
  int64_t total_steps = 0;
  AdapterSettings adapters;  // the model's only; enabled = false for every other kind
  int32_t tensor_parallel_rank = 0, tensor_parallel_size = 1;  // the model's only (ABI 1.10)
  int32_t sequence_parallel_rank = 0, sequence_parallel_size = 1;  // the model's only (ABI 1.11)
  int32_t expert_parallel_rank = 0, expert_parallel_size = 1;  // the model's only (ABI 1.12)
  int32_t sparse_shard_rank = 0, sparse_shard_size = 1;        // the model's only (ABI 1.14)
  int32_t context_parallel_rank = 0, context_parallel_size = 1;  // the model's only (ABI 1.16)
  int32_t pipeline_parallel_rank = 0, pipeline_parallel_size = 1;  // (ABI 1.17) the stage of this rank
};

template <class VTable, class Handle>
class Instance {
 public:
  Instance() = default;
  Instance(const SlotConfig& slot, const RunContext& run)
      : slot_(slot.slot),
        run_(run),
        config_(slot.config),
        component_(slot.component),
        vt_(copy_vtable<VTable>(slot.component->vtable)) {}
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  Instance(Instance&& other) noexcept { *this = std::move(other); }
  Instance& operator=(Instance&& other) noexcept {
    std::swap(slot_, other.slot_);
    std::swap(run_, other.run_);
    std::swap(config_, other.config_);
    std::swap(component_, other.component_);
    std::swap(vt_, other.vt_);
    std::swap(handle_, other.handle_);
    return *this;
  }
  ~Instance() {
    if (handle_ != nullptr) vt_.destroy(handle_);
  }

  const std::string& slot() const { return slot_; }
  const Component& component() const { return *component_; }
  const loom_config& config() const { return config_; }
  const RunContext& run() const { return run_; }

 protected:
  // Calls the kind's create(context, config, extra..., &handle).
  template <class... Extra>
  void create(Extra... extra) {
    loom_context context{};
    context.struct_size = sizeof(context);
    context.slot = slot_.c_str();
    context.run_dir = run_.run_dir.c_str();
    context.seed = run_.seed;
    context.rank = run_.rank;
    context.world_size = run_.world_size;
    context.device = run_.device.c_str();
    context.total_steps = run_.total_steps;
    context.tensor_parallel_rank = run_.tensor_parallel_rank;
    context.tensor_parallel_size = run_.tensor_parallel_size;
    context.sequence_parallel_rank = run_.sequence_parallel_rank;
    context.sequence_parallel_size = run_.sequence_parallel_size;
    context.expert_parallel_rank = run_.expert_parallel_rank;
    context.expert_parallel_size = run_.expert_parallel_size;
    context.context_parallel_rank = run_.context_parallel_rank;
    context.context_parallel_size = run_.context_parallel_size;
    context.pipeline_parallel_rank = run_.pipeline_parallel_rank;
    context.pipeline_parallel_size = run_.pipeline_parallel_size;
    context.sparse_shard_rank = run_.sparse_shard_rank;
    context.sparse_shard_size = run_.sparse_shard_size;
    std::vector<const char*> targets;
    for (const std::string& t : run_.adapters.targets) targets.push_back(t.c_str());
    loom_adapter_spec adapters{};
    adapters.struct_size = sizeof(adapters);
    adapters.targets = targets.data();
    adapters.target_count = targets.size();
    adapters.rank = run_.adapters.rank;
    adapters.alpha = run_.adapters.alpha;
    adapters.dropout = run_.adapters.dropout;
    if (run_.adapters.enabled) context.adapters = &adapters;
    loom_status* status = vt_.create(&context, &config_, extra..., &handle_);
    if (status != nullptr) {
      const bool bad_input = host_api()->status_get_code(status) == LOOM_STATUS_CODE_INVALID_ARGUMENT;
      const std::string message = where() + ": cannot create: " + take_status_message(status);
      throw bad_input ? usage_failure(message) : runtime_failure(message);
    }
    if (handle_ == nullptr) throw runtime_failure(where() + ": create returned no object");
  }
  // Byte state of the kinds that keep some in checkpoints (dataset, tracker, hook).
  using SaveStateFn = loom_status* (*)(Handle*, const loom_byte_writer*);
  using LoadStateFn = loom_status* (*)(Handle*, const void*, size_t);
  std::string save_state_with(SaveStateFn save) {
    std::string bytes;
    loom_byte_writer writer{};
    writer.struct_size = sizeof(writer);
    writer.user = &bytes;
    writer.write = [](void* user, const void* data, size_t size) -> loom_status* {
      try {  // runs inside the plugin's frames: nothing may escape
        static_cast<std::string*>(user)->append(static_cast<const char*>(data), size);
        return nullptr;
      } catch (const std::exception& e) {
        return host_api()->status_create(LOOM_STATUS_CODE_INTERNAL, e.what());
      }
    };
    check(save(handle_, &writer), "state_save");
    return bytes;
  }
  void load_state_with(LoadStateFn load, const std::string& bytes) {
    check(load(handle_, bytes.data(), bytes.size()), "state_load");
  }

  void check(loom_status* status, const char* call) const {
    if (status != nullptr) throw runtime_failure(where() + ": " + call + " failed: " + take_status_message(status));
  }
  // For calls that read files from outside (a checkpoint someone handed over): a plugin that
  // says the input is bad or missing (INVALID_ARGUMENT, NOT_FOUND) gives exit code 2, like any
  // other bad input; anything else stays a runtime failure.
  void check_input(loom_status* status, const char* call) const {
    if (status == nullptr) return;
    const loom_status_code code = host_api()->status_get_code(status);
    const std::string message = where() + ": " + call + " failed: " + take_status_message(status);
    if (code == LOOM_STATUS_CODE_INVALID_ARGUMENT || code == LOOM_STATUS_CODE_NOT_FOUND) throw usage_failure(message);
    throw runtime_failure(message);
  }
  std::string where() const {
    return "[" + slot_ + "] " + component_->name + " (" + component_->plugin->path + ")";
  }

  std::string slot_;
  RunContext run_;  // strings referenced by the context stay alive as long as the instance
  loom_config config_;
  const Component* component_ = nullptr;
  VTable vt_{};
  Handle* handle_ = nullptr;
};

}  // namespace loom
