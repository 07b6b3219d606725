#include "checkpoint/hf_export.hpp"

#include <loom/model.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <map>

#include "base/failure.hpp"
#include "formats/format_error.hpp"
#include "formats/hf_folder.hpp"
#include "formats/safetensors.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

// Tokenizer files transformers' AutoTokenizer reads, copied when the source folder has them.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json",   "tokenizer_config.json", "special_tokens_map.json",
                                           "added_tokens.json", "vocab.json",            "merges.txt",
                                           "tokenizer.model",  "chat_template.jinja",   "chat_template.json"};

const char* torch_dtype_name(at::ScalarType t) {
  return t == at::kBFloat16 ? "bfloat16" : t == at::kHalf ? "float16" : "float32";
}

struct Shard {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  uint64_t bytes = 0;
};

// Parameters in registration order, converted, packed into shards of at most max bytes (a
// tensor larger than max gets a shard of its own, as save_pretrained does).
std::vector<Shard> plan_shards(ModelInstance& model, const HfExportOptions& options) {
  std::vector<Shard> shards(1);
  for (auto& [name, weight] : hf_weights(model, options)) {
    at::Tensor t = weight;
    if (at::isFloatingType(t.scalar_type())) t = t.to(options.dtype);
    t = t.to(at::kCPU).contiguous();
    const uint64_t bytes = t.nbytes();
    if (!shards.back().tensors.empty() && shards.back().bytes + bytes > options.max_shard_bytes) shards.emplace_back();
    shards.back().tensors.emplace_back(name, t);
    shards.back().bytes += bytes;
  }
  return shards;
}

std::string shard_name(size_t i, size_t n) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return name;
}

HfExportResult write_folder(ModelInstance& model, const nlohmann::json& hf, const fs::path& dir,
                            const HfExportOptions& options) {
  HfExportResult result;
  nlohmann::json config = hf.at("config");
  config["torch_dtype"] = torch_dtype_name(options.dtype);
  write_json(dir / formats::kHfConfig, config);
  if (hf.contains("generation_config") && hf["generation_config"].is_object())
    write_json(dir / formats::kHfGenerationConfig, hf["generation_config"]);

  const std::vector<Shard> shards = plan_shards(model, options);
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shards.size() == 1 ? formats::kHfWeights : shard_name(i, shards.size());
    std::vector<formats::OutgoingTensor> out;
    for (const auto& [tensor_name, t] : shards[i].tensors) {
      const formats::DType* dtype = safetensors_dtype(t.scalar_type());
      if (dtype == nullptr)
        throw runtime_failure("export: parameter '" + tensor_name + "' has dtype " + c10::toString(t.scalar_type()) +
                              ", which the export does not write");
      out.push_back({tensor_name, dtype, t.sizes().vec(), t.data_ptr()});
      weight_map[tensor_name] = name;
      ++result.tensors;
      result.bytes += t.nbytes();
    }
    formats::write_safetensors((dir / name).string(), std::move(out), {{"format", "pt"}});
  }
  result.shards = shards.size();
  if (shards.size() > 1)
    write_json(dir / formats::kHfIndex, {{"metadata", {{"total_size", result.bytes}}}, {"weight_map", weight_map}});

  if (hf.contains("files_from") && hf["files_from"].is_string()) {
    const fs::path from = hf["files_from"].get<std::string>();
    for (const char* name : kTokenizerFiles) {
      if (!formats::is_regular_file((from / name).string())) continue;
      const std::string bytes = formats::read_text_file((from / name).string(), uint64_t(1) << 30);
      formats::OutputFile file((dir / name).string());
      file.write(bytes.data(), bytes.size());
      file.commit();
      ++result.copied_files;
    }
  }
  return result;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void write_json(const fs::path& path, const nlohmann::json& value) {
  const std::string text = value.dump(2) + "\n";
  formats::OutputFile file(path.string());
  file.write(text.data(), text.size());
  file.commit();
}

const formats::DType* safetensors_dtype(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return formats::dtype_named("BF16");
    case at::kHalf: return formats::dtype_named("F16");
    case at::kFloat: return formats::dtype_named("F32");
    case at::kDouble: return formats::dtype_named("F64");
    case at::kLong: return formats::dtype_named("I64");
    case at::kInt: return formats::dtype_named("I32");
    default: return nullptr;
  }
}

std::vector<std::pair<std::string, at::Tensor>> hf_weights(ModelInstance& model, const HfExportOptions& options) {
  const std::vector<ModelParam> params = model.params();
  std::map<std::string, const ModelParam*> by_name;
  for (const ModelParam& p : params) by_name[p.name] = &p;
  // A parameter's value: the whole one options.whole gives (tensor-parallel pieces), or its own.
  const auto value = [&](const ModelParam& p) {
    const bool replaced = options.whole != nullptr && options.whole->count(p.name) > 0;
    return replaced ? options.whole->at(p.name) : p.tensor->detach();
  };
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const ModelParam& p : params) {
    if (p.flags & LOOM_PARAM_FLAG_ADAPTER) {
      if (!options.merge_adapters)
        throw usage_failure("export: the model carries LoRA adapters ([lora]); add --merge to fold them into the "
                            "base weights, or write them alone with --format peft");
      continue;
    }
    at::Tensor t = value(p);
    const std::string module = ends_with(p.name, ".weight") ? p.name.substr(0, p.name.size() - 7) : "";
    const auto a = by_name.find(module + ".lora_A.weight"), b = by_name.find(module + ".lora_B.weight");
    if (!module.empty() && a != by_name.end() && b != by_name.end()) {
      // W + scale B A in fp32, whatever the base is stored in (a bf16 frozen base is not rounded
      // twice: the sum goes to options.dtype directly)
      at::Tensor delta = at::matmul(value(*b->second).to(at::kFloat), value(*a->second).to(at::kFloat));
      if (p.flags & LOOM_PARAM_FLAG_IN_OUT) delta = delta.t();
      t = t.to(at::kFloat) + delta.to(t.device()) * options.adapter_scale;
    }
    out.emplace_back(p.name, t);
  }
  if (options.whole != nullptr)  // experts that other ranks hold (expert parallelism)
    for (const auto& [name, t] : *options.whole)
      if (!by_name.count(name)) out.emplace_back(name, t);
  return out;
}

void write_new_folder(const fs::path& out, const std::string& command, const std::function<void(const fs::path&)>& fill) {
  std::error_code ec;
  if (fs::exists(out, ec))
    throw usage_failure(command + ": " + out.string() + " already exists; choose a new --out folder (nothing is "
                        "overwritten)");
  const fs::path staging = out.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) throw runtime_failure(command + ": cannot create " + staging.string() + ": " + ec.message());
  try {
    fill(staging);
    fs::rename(staging, out);
  } catch (const formats::FormatError& e) {
    fs::remove_all(staging, ec);
    throw runtime_failure(command + ": " + e.what());
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
}

at::ScalarType parse_export_dtype(const std::string& name, const std::string& where) {
  if (name == "bf16" || name == "bfloat16") return at::kBFloat16;
  if (name == "fp16" || name == "float16") return at::kHalf;
  if (name == "fp32" || name == "float32") return at::kFloat;
  throw usage_failure(where + ": unknown dtype \"" + name + "\"; use bf16, fp16 or fp32");
}

uint64_t parse_byte_size(const std::string& text, const std::string& where) {
  size_t end = 0;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  const std::string unit = text.substr(end);
  struct Unit { const char* name; uint64_t bytes; };
  constexpr Unit kUnits[] = {{"", 1},          {"B", 1},          {"KB", 1000},       {"MB", 1000000},
                             {"GB", 1000000000}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}};
  for (const Unit& u : kUnits) {
    if (end == 0 || end > 12 || unit != u.name) continue;
    const uint64_t n = std::stoull(text.substr(0, end));
    if (n > 0) return n * u.bytes;
  }
  throw usage_failure(where + ": \"" + text + "\" is not a size; write a positive number with KB, MB, GB, KiB, MiB "
                      "or GiB, such as 5GB");
}

HfExportResult export_hf_folder(ModelInstance& model, const fs::path& out, const HfExportOptions& options) {
  const std::string described = model.hugging_face();
  if (described.empty())
    throw usage_failure("export: the model `" + std::string(model.component().name) +
                        "` is not a Hugging Face architecture, so there is no Hugging Face folder to write; "
                        "`host checkpoint export` writes its weights alone");
  const nlohmann::json hf = nlohmann::json::parse(described, nullptr, /*allow_exceptions=*/false);
  if (hf.is_discarded() || !hf.is_object() || !hf.contains("config") || !hf["config"].is_object())
    throw runtime_failure("export: the model `" + std::string(model.component().name) +
                          "` described itself without a \"config\" object (a plugin bug)");
  HfExportResult result;
  write_new_folder(out, "export", [&](const fs::path& staging) { result = write_folder(model, hf, staging, options); });
  return result;
}

}  // namespace loom
