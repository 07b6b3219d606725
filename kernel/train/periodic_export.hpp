// periodic_export.hpp: `[export]`, Hugging Face folders of the model written while it trains
// (XTuner's hf_interval): RUN/hf/step-N every `every` steps and at the end, each appearing
// whole (checkpoint/hf_export.hpp), the oldest deleted beyond `keep`. Rank 0 writes; under
// tensor parallelism its tensor group gathers the split weights first (Trainer::export_due).
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "abi/compute_components.hpp"
#include "checkpoint/hf_export.hpp"
#include "train/run_plan.hpp"

namespace loom {

class PeriodicExport {
 public:
  // Throws a usage Failure before training when the settings or the model cannot export.
  // lora: the run's [lora]; its adapters are merged into every export.
  PeriodicExport(const ExportSettings& settings, const std::filesystem::path& run_dir, ModelInstance& model,
                 const AdapterSettings& lora);

  // Whether to export after this step (`every` divides it), or at the end (at_end, and this
  // step has none yet).
  bool due(int64_t step) const { return settings_.every > 0 && step % settings_.every == 0; }
  bool due_at_end(int64_t step) const { return settings_.at_end && last_step_ != step; }
  // Writes RUN/hf/step-N. whole: what to write instead of the model's own parameters (under
  // tensor parallelism, the split ones gathered whole); empty: the model's.
  void write(int64_t step, const std::map<std::string, at::Tensor>& whole = {});
  // Under tensor parallelism the other ranks of the writer's tensor group gather too, and
  // remember the step as written.
  void gathered(int64_t step) { last_step_ = step; }

 private:
  ExportSettings settings_;
  HfExportOptions options_;
  std::filesystem::path dir_;
  ModelInstance& model_;
  int64_t last_step_ = -1;
};

}  // namespace loom
