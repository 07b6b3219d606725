#include "train/init_weights.hpp"

#include <spdlog/spdlog.h>

#include "base/failure.hpp"
#include "checkpoint/backend_from_index.hpp"
#include "checkpoint/sharded_checkpoint.hpp"
#include "checkpoint/checkpoint_index.hpp"
#include "format_error.hpp"
#include "weight_loading.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

constexpr const char* kModelPrefix = "model/";

// A Loom checkpoint's model/ tensors, under the parameter names.
class CheckpointWeightSource final : public formats::WeightSource {
 public:
  CheckpointWeightSource(const fs::path& dir, const Registry& registry) : dir_(dir) {
    const auto backend = open_backend(read_checkpoint_backend(dir), registry, dir);
    for (auto& [name, t] : read_checkpoint(*backend, dir).tensors)
      if (name.rfind(kModelPrefix, 0) == 0) tensors_[name.substr(std::string(kModelPrefix).size())] = t;
  }
  std::string where() const override { return dir_.string(); }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [name, t] : tensors_) out.push_back(name);
    return out;
  }
  bool has(const std::string& name) const override { return tensors_.count(name) > 0; }
  at::Tensor view(const std::string& name) const override { return tensors_.at(name); }

 private:
  fs::path dir_;
  std::map<std::string, at::Tensor> tensors_;
};

}  // namespace

void init_model_weights(ModelInstance& model, const ModelInitSettings& settings, const Registry* registry) {
  if (settings.init_from.empty()) return;
  const fs::path from = settings.init_from;
  const std::string where = "[model] init_from = \"" + settings.init_from + "\"";
  std::vector<std::pair<std::string, at::Tensor>> params;
  for (const ModelParam& p : model.params()) params.emplace_back(p.name, *p.tensor);
  formats::LoadRules rules;
  rules.strict = settings.init_strict;
  rules.strict_key = "init_strict";
  try {
    std::unique_ptr<formats::WeightSource> source;
    std::string why;
    if (!fs::is_directory(from))
      throw usage_failure(where + ": " + from.string() + " is not a folder; name a Hugging Face model folder or a "
                          "Loom checkpoint's step-N folder (relative paths start at the working directory)");
    if (formats::has_hf_weights(from.string())) source = std::make_unique<formats::HfWeightSource>(from.string());
    else if (registry != nullptr && verify_checkpoint(from, &why))
      source = std::make_unique<CheckpointWeightSource>(from, *registry);
    else
      throw usage_failure(where + ": " + from.string() +
                          " is neither a Hugging Face folder (model.safetensors or model.safetensors.index.json) nor a "
                          "valid Loom checkpoint (" + why + "); name one of them");
    const formats::LoadReport report = formats::load_weights(*source, params, rules);
    spdlog::info("{}: loaded {} tensors ({})", where, report.loaded, report.summary());
  } catch (const formats::FormatError& e) {
    throw usage_failure(where + ": " + e.what());
  }
}

}  // namespace loom
