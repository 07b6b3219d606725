#include "checkpoint/peft_export.hpp"

#include <loom/model.h>
#include <nlohmann/json.hpp>

#include "base/failure.hpp"
#include "checkpoint/hf_export.hpp"
#include "formats/peft_adapter.hpp"

namespace fs = std::filesystem;

namespace loom {

PeftExportResult export_peft_folder(ModelInstance& model, const fs::path& out, const PeftExportOptions& options) {
  const std::vector<ModelParam> params = model.params();
  std::vector<std::pair<std::string, at::Tensor>> adapters;
  bool in_out = false;  // PEFT's fan_in_fan_out: the adapted layers store (in, out) weights
  for (const ModelParam& p : params) {
    if (p.flags & LOOM_PARAM_FLAG_ADAPTER)
      adapters.emplace_back(formats::kPeftKeyPrefix + p.name, p.tensor->detach().to(options.dtype).cpu().contiguous());
    if (p.flags & LOOM_PARAM_FLAG_IN_OUT) in_out = true;
  }
  if (adapters.empty())
    throw usage_failure("export --format peft: model " + model.component().name +
                        " has no LoRA adapters (the run had no [lora]); export it with --format hf");
  formats::PeftLoraConfig config;
  config.r = options.adapters.rank;
  config.lora_alpha = options.adapters.alpha;
  config.lora_dropout = options.adapters.dropout;
  config.target_modules = options.adapters.targets;
  config.fan_in_fan_out = in_out;
  // The folder the base came from (hf_causal_lm's `from`), where the model says so.
  const nlohmann::json hf = nlohmann::json::parse(model.hugging_face(), nullptr, /*allow_exceptions=*/false);
  if (hf.is_object() && hf.contains("files_from") && hf["files_from"].is_string())
    config.base_model = hf["files_from"].get<std::string>();

  PeftExportResult result;
  result.base_model = config.base_model;
  write_new_folder(out, "export", [&](const fs::path& staging) {
    write_json(staging / formats::kPeftConfig, formats::peft_lora_config_json(config));
    std::vector<formats::OutgoingTensor> tensors;
    for (const auto& [name, t] : adapters) {
      tensors.push_back({name, safetensors_dtype(t.scalar_type()), t.sizes().vec(), t.data_ptr()});
      result.bytes += t.nbytes();
    }
    formats::write_safetensors((staging / formats::kPeftWeights).string(), std::move(tensors), {{"format", "pt"}});
  });
  result.tensors = adapters.size();
  return result;
}

}  // namespace loom
