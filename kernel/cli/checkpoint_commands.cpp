// `host checkpoint inspect DIR` and `host checkpoint export DIR`: read a checkpoint without
// the run that wrote it. The index names the backend and its options, so the same plugin
// reads it back.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "abi/checkpoint_backend.hpp"
#include "abi/plugin_loader.hpp"
#include "base/failure.hpp"
#include "checkpoint/backend_from_index.hpp"
#include "checkpoint/sharded_checkpoint.hpp"
#include "checkpoint/checkpoint_index.hpp"
#include "cli/commands.hpp"
#include "train/run_state.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

struct OpenedCheckpoint {
  Registry registry;
  std::optional<int64_t> step;
  std::string invalid_reason;
  std::unique_ptr<CheckpointBackendInstance> backend;
};

std::unique_ptr<OpenedCheckpoint> open_checkpoint(const fs::path& dir, const std::string& backend_override = "") {
  if (!fs::is_directory(dir)) throw usage_failure(dir.string() + ": not a directory; pass a checkpoint's step-N folder");
  auto out = std::make_unique<OpenedCheckpoint>();
  out->step = verify_checkpoint(dir, &out->invalid_reason);
  CheckpointBackendRecord record = read_checkpoint_backend(dir);
  if (!backend_override.empty()) record = {backend_override, {}};
  load_plugins(out->registry, plugin_search_path({}), /*keep_going=*/true);
  out->backend = open_backend(record, out->registry, dir);
  return out;
}

std::string shape_text(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

}  // namespace

int command_checkpoint_inspect(const CommandLine& line) {
  const std::string& dir = line.args.at(0);
  const bool json = line.json;
  auto opened = open_checkpoint(dir);
  // An invalid checkpoint is still shown as far as it can be read; when even that fails, the
  // reason it is invalid comes first (it usually explains the read error).
  LoadedCheckpoint loaded;
  try {
    loaded = read_checkpoint(*opened->backend, dir);
  } catch (const Failure& f) {
    if (opened->step) throw;
    throw usage_failure(dir + ": INVALID: " + opened->invalid_reason + "; its tensors cannot be read: " + f.what());
  }
  nlohmann::json metadata = nlohmann::json::parse(loaded.metadata_json, nullptr, /*allow_exceptions=*/false);
  const std::vector<std::string> nonfinite = nonfinite_tensors(loaded, {""});
  // A damaged checkpoint is bad input: exit code 2, as for any other bad file.
  const int exit_code = opened->step ? 0 : static_cast<int>(ExitCode::usage);
  if (json) {
    nlohmann::json out = {{"path", dir},
                          {"valid", opened->step.has_value()},
                          {"backend", opened->backend->component().name},
                          {"tensors", nlohmann::json::array()}};
    if (!opened->step) out["invalid_reason"] = opened->invalid_reason;
    if (!metadata.is_discarded()) {
      metadata.erase("manifest");
      out["metadata"] = metadata;
    }
    for (const auto& [name, t] : loaded.tensors)
      out["tensors"].push_back({{"name", name}, {"dtype", c10::toString(t.scalar_type())},
                                {"shape", t.sizes().vec()}, {"bytes", t.nbytes()}});
    out["nonfinite"] = nonfinite;
    std::cout << out.dump(2) << "\n";
    return exit_code;
  }
  std::cout << dir << ": " << (opened->step ? "valid" : "INVALID: " + opened->invalid_reason) << ", backend "
            << opened->backend->component().name << "\n";
  if (!metadata.is_discarded() && metadata.contains("step"))
    std::cout << "step " << metadata["step"] << ", tokens " << metadata["tokens"] << ", elapsed "
              << metadata["elapsed_s"] << " s, world size " << metadata["world_size"] << "\n";
  size_t total = 0;
  std::cout << std::left << std::setw(48) << "tensor" << std::setw(10) << "dtype" << std::setw(20) << "shape"
            << "bytes\n";
  for (const auto& [name, t] : loaded.tensors) {
    std::cout << std::setw(48) << name << std::setw(10) << c10::toString(t.scalar_type()) << std::setw(20)
              << shape_text(t) << t.nbytes() << "\n";
    total += t.nbytes();
  }
  std::cout << loaded.tensors.size() << " tensors, " << total << " bytes\n";
  if (!nonfinite.empty()) {
    std::cout << "NaN or infinite values in " << nonfinite.size() << " tensors (resuming from it needs [checkpoint] "
              << "allow_nonfinite = true):\n";
    for (const std::string& n : nonfinite) std::cout << "  " << n << "\n";
  }
  return exit_code;
}

int command_checkpoint_export(const CommandLine& line) {
  const std::string& dir = line.args.at(0);
  const std::string format = line.format.empty() ? "hf-safetensors" : line.format;
  const std::string out_path = line.out.empty() ? "model.safetensors" : line.out;
  if (format != "hf-safetensors")
    throw usage_failure("checkpoint export: unknown --format \"" + format + "\"; supported: hf-safetensors");
  auto source = open_checkpoint(dir);
  if (!source->step)
    throw runtime_failure(dir + ": not a valid checkpoint (" + source->invalid_reason + "); export another one");
  const LoadedCheckpoint loaded = read_checkpoint(*source->backend, dir);
  NamedTensors weights;  // model weights alone, under the model's own (Hugging Face) names
  for (const auto& [name, t] : loaded.tensors)
    if (name.rfind("model/", 0) == 0) weights.emplace_back(name.substr(6), t);
  if (weights.empty()) throw runtime_failure(dir + ": checkpoint holds no model/ tensors");

  const fs::path out(out_path);
  const fs::path staging = fs::path(out_path + ".tmp-export");
  fs::remove_all(staging);
  fs::create_directories(staging);
  auto writer = open_checkpoint(dir, "safetensors");
  writer->backend->save(staging.string(), weights, R"({"format":"pt","exported_by":"loom"})");
  fs::path written;
  for (const auto& entry : fs::directory_iterator(staging)) written = entry.path();
  if (written.empty()) throw runtime_failure("safetensors backend wrote no file");
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  fs::rename(written, out);
  fs::remove_all(staging);
  std::cout << "wrote " << weights.size() << " tensors to " << out.string() << "\n";
  return 0;
}

}  // namespace loom
