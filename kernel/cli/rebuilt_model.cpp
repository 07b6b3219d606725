// rebuilt_model.cpp: see rebuilt_model.hpp.
#include "cli/rebuilt_model.hpp"

#include <unistd.h>

#include <fstream>
#include <variant>
#include <toml++/toml.h>

#include "abi/plugin_loader.hpp"
#include "base/failure.hpp"
#include "checkpoint/backend_from_index.hpp"
#include "checkpoint/sharded_checkpoint.hpp"
#include "checkpoint/checkpoint_index.hpp"
#include "checkpoint/checkpoint_manager.hpp"
#include "config/manifest.hpp"
#include "config/options.hpp"
#include "config/plan.hpp"
#include "formats/hf_folder.hpp"
#include "train/run_state.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

// A step-N folder as given, or a run folder's newest valid checkpoint (where its manifest
// puts checkpoints).
fs::path checkpoint_of(const fs::path& source, const Registry& registry, const std::string& command) {
  std::string why;
  if (verify_checkpoint(source, &why)) return source;
  if (!fs::is_regular_file(source / "manifest.toml"))
    throw usage_failure(command + ": " + source.string() + " is neither a valid checkpoint (" + why +
                        ") nor a run folder (no manifest.toml)" +
                        (command == "generate" ? " nor a Hugging Face model folder (no config.json with weights)" : "") +
                        "; pass a run folder or one of its step-N folders");
  const Manifest manifest = load_manifest(source / "manifest.toml", {});
  const RunPlan plan = resolve_plan(manifest, registry);
  const fs::path dir = fs::path(plan.checkpoint.dir).is_absolute() ? fs::path(plan.checkpoint.dir)
                                                                   : source / plan.checkpoint.dir;
  if (auto newest = newest_valid_checkpoint(dir)) return *newest;
  throw usage_failure(command + ": the run " + source.string() + " has no valid checkpoint in " + dir.string() +
                      "; train it first (with [checkpoint] every or at the end)");
}

// The checkpoint's resolved manifest as a file the manifest reader takes, removed on scope exit.
struct ManifestFile {
  fs::path path;
  explicit ManifestFile(const std::string& text) {
    std::string name = (fs::temp_directory_path() / "loom-model-XXXXXX").string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0) throw runtime_failure("cannot create a temporary file in " + fs::temp_directory_path().string());
    ::close(fd);
    path = name;
    std::ofstream(path) << text;
  }
  ~ManifestFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

// A model's int seq_len option, as the models of this repository and most others name it; 0 when
// it has none (hf_causal_lm's 0 means its own default, which is also "ask the model").
int64_t seq_len_option(const loom_config& config) {
  const auto it = config.values.find("seq_len");
  return it != config.values.end() && std::holds_alternative<int64_t>(it->second) ? std::get<int64_t>(it->second) : 0;
}

RunContext cpu_context(const std::string& dir, uint64_t seed, int64_t steps) {
  RunContext context;
  context.run_dir = dir;
  context.device = "cpu";
  context.seed = seed;
  context.total_steps = steps;
  return context;
}

void from_hf_folder(RebuiltModel& out, const fs::path& folder, const std::string& command) {
  load_plugins(out.registry, plugin_search_path({}), /*keep_going=*/true);
  const Component* component = out.registry.lookup(LOOM_KIND_MODEL, "hf_causal_lm");
  if (!component) throw usage_failure(command + ": the hf_causal_lm model plugin is not installed; it reads " + folder.string());
  SlotConfig slot{"model", component, {}};
  toml::table options{{"from", folder.string()}};
  slot.config.values = resolve_options(options, component->options, "[model] hf_causal_lm", command, {});
  out.model = std::make_unique<ModelInstance>(slot, cpu_context(folder.string(), 0, 0));
  out.source = folder;
  out.hugging_face_folder = true;
}

}  // namespace

std::unique_ptr<RebuiltModel> rebuild_model(const fs::path& source, const std::string& command, bool allow_hf_folder) {
  auto out = std::make_unique<RebuiltModel>();
  if (allow_hf_folder && fs::is_regular_file(source / "config.json") && formats::has_hf_weights(source.string())) {
    from_hf_folder(*out, source, command);
    return out;
  }
  Registry registry;
  load_plugins(registry, plugin_search_path({}), /*keep_going=*/true);
  const fs::path checkpoint = checkpoint_of(source, registry, command);
  const auto backend = open_backend(read_checkpoint_backend(checkpoint), registry, checkpoint);
  const LoadedCheckpoint loaded = read_checkpoint(*backend, checkpoint);
  const RestoredRun run = read_restored_run(loaded, checkpoint.string());

  const ManifestFile manifest_file(run.resolved_manifest);
  const Manifest manifest = load_manifest(manifest_file.path, {});
  load_plugins(out->registry, plugin_search_path(manifest_plugin_dirs(manifest)), /*keep_going=*/false);
  const RunPlan plan = resolve_plan(manifest, out->registry);
  RunContext context = cpu_context(checkpoint.string(), static_cast<uint64_t>(plan.run.seed), plan.run.steps);
  context.adapters = plan.lora;
  out->model = std::make_unique<ModelInstance>(plan.model, context);
  prepare_for_restore(*out->model, plan, loaded);
  restore_model(*out->model, loaded, checkpoint.string());
  out->adapters = plan.lora;
  out->seq_len = seq_len_option(plan.model.config);
  out->source = checkpoint;
  out->step = run.step;
  return out;
}

}  // namespace loom
