#include "train/init_weights.hpp"

#include <loom/model.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <set>
#include <sstream>

#include "base/failure.hpp"
#include "checkpoint/backend_from_index.hpp"
#include "checkpoint/sharded_checkpoint.hpp"
#include "checkpoint/checkpoint_index.hpp"
#include "checkpoint/row_parts.hpp"
#include "formats/format_error.hpp"
#include "formats/weight_loading.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

constexpr const char* kModelPrefix = "model/";

// A Loom checkpoint's model/ tensors, under the parameter names. With a window, tables a
// row-sharded run split come as that rank's rows alone (named in rows_windowed).
class CheckpointWeightSource final : public formats::WeightSource {
 public:
  CheckpointWeightSource(const fs::path& dir, const Registry& registry, std::optional<RowWindow> window)
      : dir_(dir) {
    const auto backend = open_backend(read_checkpoint_backend(dir), registry, dir);
    LoadedCheckpoint loaded = read_checkpoint(*backend, dir, window);
    const size_t prefix = std::string(kModelPrefix).size();
    for (auto& [name, t] : loaded.tensors)
      if (name.rfind(kModelPrefix, 0) == 0) tensors_[name.substr(prefix)] = t;
    for (const std::string& name : loaded.rows_windowed)
      if (name.rfind(kModelPrefix, 0) == 0) rows_windowed_.insert(name.substr(prefix));
  }
  const std::set<std::string>& rows_windowed() const { return rows_windowed_; }
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
  std::set<std::string> rows_windowed_;
};

// Row-sharded tables (ABI 1.14): the source holds whole tables, the model this rank's rows
// (rows_held of <loom/sparse_tables.hpp>), so each table is cut to them, except those the source
// already read as this rank's rows.
class HeldRowsSource final : public formats::WeightSource {
 public:
  HeldRowsSource(const formats::WeightSource& whole, std::set<std::string> tables, RowWindow window)
      : whole_(whole), tables_(std::move(tables)), window_(window) {}
  std::string where() const override { return whole_.where(); }
  std::vector<std::string> names() const override { return whole_.names(); }
  bool has(const std::string& name) const override { return whole_.has(name); }
  at::Tensor view(const std::string& name) const override {
    at::Tensor t = whole_.view(name);
    if (tables_.count(name) == 0 || t.dim() < 1) return t;
    const int64_t rows = t.size(0);
    return t.narrow(0, first_held_row(rows, window_.rank, window_.ranks), held_row_count(rows, window_.rank, window_.ranks));
  }
  void done(const std::string& name) const override { whole_.done(name); }

 private:
  const formats::WeightSource& whole_;
  std::set<std::string> tables_;
  RowWindow window_;
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
                        const Registry* registry, const std::set<std::string>* held_elsewhere,
                        const formats::WriteValue& write) {
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
  rules.write = write;
  std::optional<RowWindow> window;  // row-sharded tables: this rank loads its rows
  std::set<std::string> row_tables;
  if (model.run().sparse_shard_size > 1) {
    window = RowWindow{model.run().sparse_shard_rank, model.run().sparse_shard_size};
    for (const ModelParam& p : model.params())
      if ((p.flags & LOOM_PARAM_FLAG_ROW_SHARD) != 0) row_tables.insert(p.name);
  }
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
      source = std::make_unique<CheckpointWeightSource>(from, *registry, window);
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
    std::unique_ptr<formats::WeightSource> held_rows;  // wraps source, which it reads
    if (window) {
      if (const auto* checkpoint = dynamic_cast<const CheckpointWeightSource*>(source.get()))
        for (const std::string& name : checkpoint->rows_windowed()) row_tables.erase(name);
      held_rows = std::make_unique<HeldRowsSource>(*source, std::move(row_tables), *window);
    }
    const formats::TensorPieceSource pieces(held_rows ? *held_rows : *source, std::move(splits),
                                            model.run().tensor_parallel_rank, model.run().tensor_parallel_size);
    const formats::LoadReport report = formats::load_weights(pieces, params, rules);
    spdlog::info("{}: loaded {} tensors ({})", where, report.loaded, report.summary());
  } catch (const formats::FormatError& e) {
    throw usage_failure(where + ": " + e.what());
  }
}

}  // namespace loom
