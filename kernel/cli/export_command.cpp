// `host export RUN_OR_CHECKPOINT --format hf --out DIR`: rebuilds the model a checkpoint was
// trained with (from the resolved manifest the checkpoint carries), loads its weights, and
// writes it as a Hugging Face folder (checkpoint/hf_export.hpp).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "abi/plugin_loader.hpp"
#include "base/failure.hpp"
#include "checkpoint/backend_from_index.hpp"
#include "checkpoint/checkpoint_index.hpp"
#include "checkpoint/checkpoint_manager.hpp"
#include "checkpoint/hf_export.hpp"
#include "cli/commands.hpp"
#include "config/manifest.hpp"
#include "config/plan.hpp"
#include "train/run_state.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

// A step-N folder as given, or a run folder's newest valid checkpoint (where its manifest
// puts checkpoints).
fs::path checkpoint_of(const fs::path& source, const Registry& registry) {
  std::string why;
  if (verify_checkpoint(source, &why)) return source;
  if (!fs::is_regular_file(source / "manifest.toml"))
    throw usage_failure("export: " + source.string() + " is neither a valid checkpoint (" + why +
                        ") nor a run folder (no manifest.toml); pass a run folder or one of its step-N folders");
  const Manifest manifest = load_manifest(source / "manifest.toml", {});
  const RunPlan plan = resolve_plan(manifest, registry);
  const fs::path dir = fs::path(plan.checkpoint.dir).is_absolute() ? fs::path(plan.checkpoint.dir)
                                                                   : source / plan.checkpoint.dir;
  if (auto newest = newest_valid_checkpoint(dir)) return *newest;
  throw usage_failure("export: the run " + source.string() + " has no valid checkpoint in " + dir.string() +
                      "; train it first (with [checkpoint] every or at the end)");
}

// The checkpoint's resolved manifest as a file the manifest reader takes, removed on scope exit.
struct ManifestFile {
  fs::path path;
  explicit ManifestFile(const std::string& text) {
    std::string name = (fs::temp_directory_path() / "loom-export-XXXXXX").string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0) throw runtime_failure("export: cannot create a temporary file in " + fs::temp_directory_path().string());
    ::close(fd);
    path = name;
    std::ofstream(path) << text;
  }
  ~ManifestFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

}  // namespace

int command_export(const CommandLine& line) {
  if (!line.format.empty() && line.format != "hf")
    throw usage_failure("export: unknown --format \"" + line.format + "\"; supported: hf (see host export --help)");
  if (line.out.empty()) throw usage_failure("export: --out DIR is required: the new folder to write");
  HfExportOptions options;
  options.dtype = parse_export_dtype(line.dtype, "export --dtype");
  options.max_shard_bytes = parse_byte_size(line.max_shard_size, "export --max-shard-size");

  Registry registry;
  load_plugins(registry, plugin_search_path({}), /*keep_going=*/true);
  const fs::path checkpoint = checkpoint_of(line.args.at(0), registry);
  const auto backend = open_backend(read_checkpoint_backend(checkpoint), registry, checkpoint);
  const LoadedCheckpoint loaded = backend->load(checkpoint.string());
  const RestoredRun run = read_restored_run(loaded, checkpoint.string());

  const ManifestFile manifest_file(run.resolved_manifest);
  const Manifest manifest = load_manifest(manifest_file.path, {});
  Registry manifest_registry;
  load_plugins(manifest_registry, plugin_search_path(manifest_plugin_dirs(manifest)), /*keep_going=*/false);
  const RunPlan plan = resolve_plan(manifest, manifest_registry);
  RunContext context;  // the model is rebuilt on the CPU; nothing of the run is written
  context.run_dir = checkpoint.string();
  context.device = "cpu";
  context.seed = static_cast<uint64_t>(plan.run.seed);
  context.total_steps = plan.run.steps;
  ModelInstance model(plan.model, context);
  restore_model(model, loaded, checkpoint.string());

  spdlog::info("exporting {} (step {}) as a Hugging Face folder", checkpoint.string(), run.step);
  const HfExportResult r = export_hf_folder(model, line.out, options);
  std::cout << "wrote " << line.out << ": " << r.tensors << " tensors, " << r.bytes << " bytes in " << r.shards
            << (r.shards == 1 ? " file" : " shards") << ", " << r.copied_files << " tokenizer files\n"
            << "load it in Python with: AutoModelForCausalLM.from_pretrained(\"" << line.out << "\")\n";
  return 0;
}

}  // namespace loom
