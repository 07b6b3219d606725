// peft_export.hpp: a model's LoRA adapters as a PEFT adapter folder (formats/peft_adapter.hpp),
// which `PeftModel.from_pretrained(base, folder)` loads on top of the base model and
// `[model] init_from` loads back into Loom. Written whole or not at all, like hf_export.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <string>

#include "abi/compute_components.hpp"

namespace loom {

struct PeftExportOptions {
  at::ScalarType dtype = at::kFloat;  // of the adapter weights
  AdapterSettings adapters;           // the run's [lora]: r, alpha, dropout, targets
};

struct PeftExportResult {
  size_t tensors = 0;
  uint64_t bytes = 0;
  std::string base_model;  // base_model_name_or_path as written; "" when unknown
};

// A usage Failure when the model has no adapters or out already exists.
PeftExportResult export_peft_folder(ModelInstance& model, const std::filesystem::path& out,
                                    const PeftExportOptions& options);

}  // namespace loom
