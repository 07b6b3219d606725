#include "train/periodic_export.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/failure.hpp"

namespace fs = std::filesystem;

namespace loom {

PeriodicExport::PeriodicExport(const ExportSettings& settings, const fs::path& run_dir, ModelInstance& model,
                               const AdapterSettings& lora)
    : settings_(settings), model_(model) {
  options_.dtype = parse_export_dtype(settings.dtype, "[export] dtype");
  options_.max_shard_bytes = parse_byte_size(settings.max_shard_size, "[export] max_shard_size");
  // A LoRA run's exports are whole models: adapters merged into their base weights.
  options_.merge_adapters = lora.enabled;
  options_.adapter_scale = lora.scale();
  dir_ = fs::path(settings.dir).is_absolute() ? fs::path(settings.dir) : run_dir / settings.dir;
  if (model.hugging_face().empty())
    throw usage_failure("[export]: the model `" + std::string(model.component().name) +
                        "` is not a Hugging Face architecture, so it cannot be exported as one; remove [export] or "
                        "use llama, gpt or hf_causal_lm");
}

void PeriodicExport::write(int64_t step, const std::map<std::string, at::Tensor>& whole) {
  const fs::path out = dir_ / ("step-" + std::to_string(step));
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (fs::exists(out, ec)) fs::remove_all(out, ec);  // a resumed run writes the same step again
  HfExportOptions options = options_;
  if (!whole.empty()) options.whole = &whole;
  const HfExportResult r = export_hf_folder(model_, out, options);
  last_step_ = step;
  spdlog::info("exported {} ({} tensors, {:.1f} MB)", out.string(), r.tensors, double(r.bytes) / 1e6);
  if (settings_.keep <= 0) return;
  std::vector<std::pair<int64_t, fs::path>> folders;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) != 0 || name.find(".tmp-") != std::string::npos) continue;
    try {
      folders.emplace_back(std::stoll(name.substr(5)), entry.path());
    } catch (const std::exception&) {  // not one of ours
    }
  }
  std::sort(folders.begin(), folders.end());
  for (size_t i = 0; i + size_t(settings_.keep) < folders.size(); ++i) fs::remove_all(folders[i].second, ec);
}

}  // namespace loom
