#include "train/init_weights.hpp"

#include <loom/model.h>
#include <spdlog/spdlog.h>

#include <sstream>

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

// 16 -> "16", 0.5 -> "0.5": alpha as a manifest would write it.
std::string format_number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// A PEFT adapter on top of the base: only the adapters, and only if [lora] describes the same ones.
std::unique_ptr<formats::WeightSource> peft_source(const fs::path& from, const AdapterSettings& lora,
                                                   const std::string& where) {
  const formats::PeftLoraConfig config = formats::read_peft_lora_config(from.string());
  if (!lora.enabled)
    throw usage_failure(where + ": " + from.string() + " is a PEFT LoRA adapter (r = " + std::to_string(config.r) +
                        "); add [lora] with rank = " + std::to_string(config.r) + ", alpha = " +
                        format_number(config.lora_alpha) + " and its target_modules as targets");
  if (config.r != lora.rank || config.lora_alpha != lora.alpha)
    throw usage_failure(where + ": the adapter has r = " + std::to_string(config.r) + ", lora_alpha = " +
                        format_number(config.lora_alpha) + " but [lora] says rank = " + std::to_string(lora.rank) +
                        ", alpha = " + format_number(lora.alpha) + "; make them equal");
  return std::make_unique<formats::PeftWeightSource>(from.string());
}

}  // namespace

void init_model_weights(ModelInstance& model, const ModelInitSettings& settings, const AdapterSettings& lora,
                        const Registry* registry, const std::set<std::string>* held_elsewhere) {
  if (settings.init_from.empty()) return;
  const fs::path from = settings.init_from;
  const std::string where = "[model] init_from = \"" + settings.init_from + "\"";
  if (model.run().expert_parallel_size > 1 && held_elsewhere == nullptr)  // other ranks' experts would look unexpected
    throw usage_failure(where + " with [distributed] expert_parallel > 1 here: only a training run knows which "
                        "experts the other ranks hold; load with expert_parallel = 1");
  formats::LoadRules rules;
  if (held_elsewhere != nullptr) rules.held_elsewhere = *held_elsewhere;
  rules.strict = settings.init_strict;
  rules.strict_key = "init_strict";
  try {
    std::unique_ptr<formats::WeightSource> source;
    std::string why;
    if (!fs::is_directory(from))
      throw usage_failure(where + ": " + from.string() + " is not a folder; name a Hugging Face model folder, a "
                          "PEFT adapter folder or a Loom checkpoint's step-N folder (relative paths start at the "
                          "working directory)");
    const bool adapter_folder = formats::is_peft_folder(from.string());
    if (adapter_folder) source = peft_source(from, lora, where);
    else if (formats::has_hf_weights(from.string())) source = std::make_unique<formats::HfWeightSource>(from.string());
    else if (registry != nullptr && verify_checkpoint(from, &why))
      source = std::make_unique<CheckpointWeightSource>(from, *registry);
    else
      throw usage_failure(where + ": " + from.string() +
                          " is neither a Hugging Face folder (model.safetensors or model.safetensors.index.json) nor a "
                          "valid Loom checkpoint (" + why + "); name one of them");
    // An adapter folder fills the adapters; other sources the base, and adapters they happen to hold.
    std::vector<std::pair<std::string, at::Tensor>> params;
    formats::TensorSplits splits;  // tensor parallelism: this rank loads its pieces
    for (const ModelParam& p : model.params()) {
      const bool adapter = (p.flags & LOOM_PARAM_FLAG_ADAPTER) != 0;
      if (adapter_folder ? adapter : !adapter || source->has(p.name)) params.emplace_back(p.name, *p.tensor);
      if (p.split.dim >= 0) splits[p.name] = p.split;
    }
    const formats::TensorPieceSource pieces(*source, std::move(splits), model.run().tensor_parallel_rank,
                                            model.run().tensor_parallel_size);
    const formats::LoadReport report = formats::load_weights(pieces, params, rules);
    spdlog::info("{}: loaded {} tensors ({})", where, report.loaded, report.summary());
  } catch (const formats::FormatError& e) {
    throw usage_failure(where + ": " + e.what());
  }
}

}  // namespace loom
