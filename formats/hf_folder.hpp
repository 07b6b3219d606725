// hf_folder.hpp: a Hugging Face model folder, as `save_pretrained` writes it and
// `from_pretrained` reads it: config.json, and the weights as one model.safetensors or as
// shards listed by model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor:
// file}}). The folder is untrusted: every file name the index gives must be a plain name in
// the folder, every shard is validated whole before a tensor is read, and a tensor the index
// names must be in the shard it names.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "safetensors.hpp"

namespace loom::formats {

constexpr const char* kHfConfig = "config.json";
constexpr const char* kHfGenerationConfig = "generation_config.json";
constexpr const char* kHfWeights = "model.safetensors";
constexpr const char* kHfIndex = "model.safetensors.index.json";
constexpr uint64_t kMaxJsonBytes = 64ull << 20;  // config and index files; real ones are kilobytes

// Parses a JSON file (at most kMaxJsonBytes); throws a FormatError naming it, with the
// parser's line and column, when it is not JSON or not an object.
nlohmann::json read_json_object(const std::string& path);

// True when dir holds weights in Hugging Face layout (model.safetensors or its index).
bool has_hf_weights(const std::string& dir);

class HfWeights {
 public:
  struct Tensor {
    const SafetensorsFile* file;
    const TensorEntry* entry;
  };

  explicit HfWeights(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const Tensor* find(const std::string& name) const;
  const std::vector<std::string>& names() const { return names_; }  // sorted
  uint64_t total_bytes() const { return total_bytes_; }
  size_t file_count() const { return files_.size(); }

 private:
  void add_file(const std::string& name, const nlohmann::json* expected_names);

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Tensor> by_name_;
  std::vector<std::string> names_;
  uint64_t total_bytes_ = 0;
};

}  // namespace loom::formats
