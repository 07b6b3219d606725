// hf_export.hpp: writes a model as a Hugging Face folder that `from_pretrained` loads:
// config.json (the model's own description, with torch_dtype), generation_config.json,
// model.safetensors or shards of at most max_shard_bytes with model.safetensors.index.json,
// and the tokenizer files of the folder the model came from. The folder appears whole or not
// at all: it is written beside the target and renamed into place.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "abi/compute_components.hpp"

namespace loom {

struct HfExportOptions {
  at::ScalarType dtype = at::kBFloat16;  // of every floating-point tensor
  uint64_t max_shard_bytes = uint64_t(5) << 30;  // 5 GiB, as transformers' save_pretrained
};

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
