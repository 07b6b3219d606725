// pipeline.hpp: every component instance a run owns, created in dependency order and
// destroyed in reverse.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <vector>

#include "abi/checkpoint_backend.hpp"
#include "abi/compute_components.hpp"
#include "train/flat_params.hpp"
#include "train/run_plan.hpp"
#include "abi/observer_components.hpp"

namespace loom {

struct Pipeline {
  ModelInstance model;
  FlatParams flat;  // rebinds the model's parameters; the optimizer sees its buffers
  OptimizerInstance optimizer;
  DatasetInstance data;
  ScheduleInstance schedule;
  std::unique_ptr<DatasetInstance> eval_data;             // null without [eval_data]
  std::unique_ptr<CheckpointBackendInstance> checkpoint;  // null without [checkpoint]
  std::vector<TrackerInstance> trackers;
  std::vector<HookInstance> hooks;

  Pipeline(const RunPlan& c, const RunContext& run)
      : model(c.model, run),
        flat(model.params()),
        optimizer(c.optimizer, run, flat.abi()),
        data(c.data, run),
        schedule(c.schedule, run) {
    if (c.eval_data.component) eval_data = std::make_unique<DatasetInstance>(c.eval_data, run);
    if (c.checkpoint.enabled) checkpoint = std::make_unique<CheckpointBackendInstance>(c.checkpoint_backend, run);
    for (const auto& slot : c.trackers) {
      try {
        trackers.emplace_back(slot, run);
      } catch (const Failure& f) {  // a tracker that cannot start (locked database, full disk)
        if (slot.required || f.code() != ExitCode::runtime) throw;
        spdlog::warn("{}; the run goes on without this tracker (set required = true to make this fatal)", f.what());
      }
    }
    for (const auto& slot : c.hooks) hooks.emplace_back(slot, run);
  }
};

}  // namespace loom
