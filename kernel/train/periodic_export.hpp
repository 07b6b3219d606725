// periodic_export.hpp: `[export]`, Hugging Face folders of the model written while it trains
// (XTuner's hf_interval): RUN/hf/step-N every `every` steps and at the end, each appearing
// whole (checkpoint/hf_export.hpp), the oldest deleted beyond `keep`. Rank 0 writes.
#pragma once

#include <filesystem>
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

  void after_step(int64_t step);  // exports when `every` divides step
  void at_end(int64_t step);      // exports once more when at_end and this step has none yet

 private:
  void write(int64_t step);

  ExportSettings settings_;
  HfExportOptions options_;
  std::filesystem::path dir_;
  ModelInstance& model_;
  int64_t last_step_ = -1;
};

}  // namespace loom
