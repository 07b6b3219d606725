// hf_export.hpp: writes a model as a Hugging Face folder that `from_pretrained` loads:
// config.json (the model's own description, with torch_dtype), generation_config.json,
// model.safetensors or shards of at most max_shard_bytes with model.safetensors.index.json,
// and the tokenizer files of the folder the model came from. The folder appears whole or not
// at all: it is written beside the target and renamed into place.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "abi/compute_components.hpp"
#include "formats/safetensors.hpp"

namespace loom {

struct HfExportOptions {
  at::ScalarType dtype = at::kBFloat16;  // of every floating-point tensor
  uint64_t max_shard_bytes = uint64_t(5) << 30;  // 5 GiB, as transformers' save_pretrained
  // A model with LoRA adapters (LOOM_PARAM_FLAG_ADAPTER) is written only merged: each base
  // weight plus adapter_scale * B A (its transpose for LOOM_PARAM_FLAG_IN_OUT weights).
  bool merge_adapters = false;
  double adapter_scale = 0;  // [lora] alpha / rank
  // Parameters written instead of the model's own, by name: under tensor parallelism the split
  // ones gathered whole (train/tensor_parallel_checkpoint.hpp); under expert parallelism every
  // expert, this rank's and the others' (train/expert_placement.hpp). Null: the model's.
  const std::map<std::string, at::Tensor>* whole = nullptr;
};

// A JSON file as transformers writes its configs: indented by 2, a newline at the end.
void write_json(const std::filesystem::path& path, const nlohmann::json& value);

// The safetensors dtype of a LibTorch dtype; nullptr when the format has none for it.
const formats::DType* safetensors_dtype(at::ScalarType type);

// The model's weights as a Hugging Face folder holds them, in registration order, detached:
// adapters merged into their base weights (options.merge_adapters) or, when the model has
// adapters and merging is off, a usage Failure pointing at --merge and --format peft.
std::vector<std::pair<std::string, at::Tensor>> hf_weights(ModelInstance& model, const HfExportOptions& options);

// Writes a new folder whole or not at all: `fill` writes into a staging folder beside `out`,
// which is then renamed into place. A usage Failure when out exists; `command` names the caller.
void write_new_folder(const std::filesystem::path& out, const std::string& command,
                      const std::function<void(const std::filesystem::path& staging)>& fill);

// "bf16" | "fp16" | "fp32" -> the dtype; a usage Failure naming `where` otherwise.
at::ScalarType parse_export_dtype(const std::string& name, const std::string& where);
// "5GB", "500MB", "2GiB", "123" (bytes) -> bytes; a usage Failure naming `where` otherwise.
uint64_t parse_byte_size(const std::string& text, const std::string& where);

struct HfExportResult {
  size_t tensors = 0, shards = 0, copied_files = 0;
  uint64_t bytes = 0;
};

// A usage Failure when the model has no Hugging Face description (not an HF architecture) or
// out already exists; a runtime Failure when writing fails (nothing is left behind).
HfExportResult export_hf_folder(ModelInstance& model, const std::filesystem::path& out, const HfExportOptions& options);

}  // namespace loom
