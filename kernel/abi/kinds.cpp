#include "abi/kinds.hpp"

#include <stdexcept>
#include <string>

namespace loom {

// Offsets of create and destroy plus the kind's own required callbacks.
#define LOOM_REQUIRED(vtable, ...) \
  { offsetof(vtable, create), offsetof(vtable, destroy), __VA_ARGS__ }

const std::vector<KindInfo>& kinds() {
  static const std::vector<KindInfo> table = {
      {LOOM_KIND_MODEL, "model", "loom/model.h", true,
       LOOM_REQUIRED(loom_model_vtable, offsetof(loom_model_vtable, param_count),
                     offsetof(loom_model_vtable, param_get), offsetof(loom_model_vtable, forward))},
      {LOOM_KIND_DATASET, "dataset", "loom/dataset.h", false,
       LOOM_REQUIRED(loom_dataset_vtable, offsetof(loom_dataset_vtable, next))},
      {LOOM_KIND_OPTIMIZER, "optimizer", "loom/optimizer.h", true,
       LOOM_REQUIRED(loom_optimizer_vtable, offsetof(loom_optimizer_vtable, step))},
      {LOOM_KIND_SCHEDULE, "schedule", "loom/schedule.h", false,
       LOOM_REQUIRED(loom_schedule_vtable, offsetof(loom_schedule_vtable, factor))},
      {LOOM_KIND_CHECKPOINT, "checkpoint", "loom/checkpoint.h", false,
       LOOM_REQUIRED(loom_checkpoint_vtable, offsetof(loom_checkpoint_vtable, save),
                     offsetof(loom_checkpoint_vtable, load))},
      {LOOM_KIND_TRACKER, "tracker", "loom/tracker.h", false,
       LOOM_REQUIRED(loom_tracker_vtable, offsetof(loom_tracker_vtable, log))},
      {LOOM_KIND_HOOK, "hook", "loom/hook.h", false,
       LOOM_REQUIRED(loom_hook_vtable, offsetof(loom_hook_vtable, on_event))},
  };
  return table;
}

#undef LOOM_REQUIRED

const KindInfo& kind_info(loom_kind kind) {
  const auto& table = kinds();
  if (kind < 0 || static_cast<size_t>(kind) >= table.size() || table[static_cast<size_t>(kind)].kind != kind)
    throw std::out_of_range("unknown plugin kind " + std::to_string(kind));
  return table[static_cast<size_t>(kind)];
}

const char* kind_name(loom_kind kind) {
  return kind >= 0 && static_cast<size_t>(kind) < kinds().size() ? kinds()[static_cast<size_t>(kind)].name
                                                                 : "unknown";
}

bool kind_needs_torch(loom_kind kind) { return kind_info(kind).torch; }

}  // namespace loom
