#include "checkpoint/hf_export.hpp"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cctype>
#include <fstream>

#include "base/failure.hpp"
#include "format_error.hpp"
#include "hf_folder.hpp"
#include "safetensors.hpp"

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

void write_json(const fs::path& path, const nlohmann::json& value) {
  const std::string text = value.dump(2) + "\n";
  formats::OutputFile file(path.string());
  file.write(text.data(), text.size());
  file.commit();
}

struct Shard {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  uint64_t bytes = 0;
};

// Parameters in registration order, converted, packed into shards of at most max bytes (a
// tensor larger than max gets a shard of its own, as save_pretrained does).
std::vector<Shard> plan_shards(ModelInstance& model, const HfExportOptions& options) {
  std::vector<Shard> shards(1);
  for (const ModelParam& p : model.params()) {
    at::Tensor t = p.tensor->detach();
    if (at::isFloatingType(t.scalar_type())) t = t.to(options.dtype);
    t = t.to(at::kCPU).contiguous();
    const uint64_t bytes = t.nbytes();
    if (!shards.back().tensors.empty() && shards.back().bytes + bytes > options.max_shard_bytes) shards.emplace_back();
    shards.back().tensors.emplace_back(p.name, t);
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

}  // namespace

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
  std::error_code ec;
  if (fs::exists(out, ec))
    throw usage_failure("export: " + out.string() + " already exists; choose a new --out folder (nothing is "
                        "overwritten)");
  const fs::path staging = out.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) throw runtime_failure("export: cannot create " + staging.string() + ": " + ec.message());
  try {
    const HfExportResult result = write_folder(model, hf, staging, options);
    fs::rename(staging, out);
    return result;
  } catch (const formats::FormatError& e) {
    fs::remove_all(staging, ec);
    throw runtime_failure(std::string("export: ") + e.what());
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
}

}  // namespace loom
