#include "pipeline_config.hpp"

#include <algorithm>

#include "failure.hpp"

namespace fs = std::filesystem;

namespace loom {

const std::vector<OptionSpec>& run_options() {
  static const std::vector<OptionSpec> specs = {
      {"name", LOOM_OPTION_TYPE_STRING, "run", false, "Run name; the run directory is <dir>/<name>."},
      {"dir", LOOM_OPTION_TYPE_STRING, "runs", false,
       "Parent of the run directory; relative paths start at the current directory."},
      {"seed", LOOM_OPTION_TYPE_INT, "0", false, "Seed for initialization, data order and dropout."},
      {"steps", LOOM_OPTION_TYPE_INT, "100", false, "Optimizer steps to run."},
      {"device", LOOM_OPTION_TYPE_STRING, "auto", false,
       "\"auto\" (a GPU when LibTorch sees one, else the CPU), \"cpu\", \"cuda\" or \"cuda:N\". Under a launcher, "
       "\"auto\" and \"cuda\" take the GPU numbered LOCAL_RANK."},
      {"precision", LOOM_OPTION_TYPE_STRING, "fp32", false,
       "\"fp32\"; \"tf32\" (fp32 with TF32 tensor-core matmuls on CUDA); or \"bf16\": forward and loss under "
       "bf16 autocast, with fp32 weights, gradients and optimizer state."},
      {"deterministic", LOOM_OPTION_TYPE_BOOL, "false", false,
       "Deterministic LibTorch algorithms, for runs on a GPU that resume to the bit (CPU runs already do); an op "
       "without a deterministic version then fails, naming itself."},
      {"grad_accum", LOOM_OPTION_TYPE_INT, "1", false, "Micro-batches accumulated per optimizer step."},
      {"clip_grad_norm", LOOM_OPTION_TYPE_FLOAT, "1.0", false,
       "Clip the global gradient norm to this value; 0 turns clipping off."},
      {"log_every", LOOM_OPTION_TYPE_INT, "10", false, "Hand metrics to trackers every N steps (and at the end)."},
      {"threads", LOOM_OPTION_TYPE_INT, "0", false, "CPU threads for LibTorch ops; 0 keeps LibTorch's default."},
      {"cpu_memory_cache", LOOM_OPTION_TYPE_BOOL, "true", false,
       "Keep freed CPU memory for the next step instead of returning it to the OS (glibc malloc: no heap "
       "trimming, mmap only above 32 MiB); saves re-faulting every activation each step."},
      {"peak_flops", LOOM_OPTION_TYPE_FLOAT, "0.0", false,
       "FLOP/s that MFU is measured against; 0 measures the fp32 GEMM peak at start."},
  };
  return specs;
}

const std::vector<OptionSpec>& checkpoint_options() {
  static const std::vector<OptionSpec> specs = {
      {"every", LOOM_OPTION_TYPE_INT, "0", false, "Save every N steps; 0 saves only at the end and on signals."},
      {"keep", LOOM_OPTION_TYPE_INT, "3", false, "Newest checkpoints to keep; older ones are deleted after a save."},
      {"keep_every", LOOM_OPTION_TYPE_INT, "0", false,
       "Never delete checkpoints whose step is a multiple of this (milestones); 0: none."},
      {"at_end", LOOM_OPTION_TYPE_BOOL, "true", false, "Save when the run ends."},
      {"async", LOOM_OPTION_TYPE_BOOL, "true", false,
       "Write in a background thread while training goes on (tensors are copied first)."},
      {"resume", LOOM_OPTION_TYPE_STRING, "auto", false,
       "\"auto\": continue from the newest valid checkpoint; \"none\": start fresh; or a checkpoint path."},
      {"dir", LOOM_OPTION_TYPE_STRING, "checkpoints", false, "Where checkpoints go; relative to the run directory."},
  };
  return specs;
}

const std::vector<OptionSpec>& tracker_options() {
  static const std::vector<OptionSpec> specs = {
      {"required", LOOM_OPTION_TYPE_BOOL, "false", false,
       "End the run when this tracker fails; by default a failure is a warning and the tracker stops."},
  };
  return specs;
}

const std::vector<OptionSpec>& eval_data_options() {
  static const std::vector<OptionSpec> specs = {
      {"max_batches", LOOM_OPTION_TYPE_INT, "50", false,
       "Batches per evaluation; the same batches every time, so evaluations compare."},
  };
  return specs;
}

const std::vector<OptionSpec>& distributed_options() {
  static const std::vector<OptionSpec> specs = {
      {"backend", LOOM_OPTION_TYPE_STRING, "auto", false,
       "\"gloo\" (CPU tensors), \"nccl\" (CUDA tensors) or \"auto\" (by run.device)."},
      {"bucket_mb", LOOM_OPTION_TYPE_FLOAT, "25.0", false, "Gradient all-reduce bucket size in MB."},
      {"timeout_s", LOOM_OPTION_TYPE_FLOAT, "300.0", false,
       "Seconds to wait for the other ranks (meeting, every collective) before failing the run."},
  };
  return specs;
}

namespace {

struct SlotDef {
  const char* key;
  loom_kind kind;
  bool many;                // array of tables ([[trackers]])
  const char* default_use;  // used when the table is absent; nullptr: required
};

const SlotDef kSlots[] = {
    {"model", LOOM_KIND_MODEL, false, nullptr},
    {"data", LOOM_KIND_DATASET, false, nullptr},
    {"optimizer", LOOM_KIND_OPTIMIZER, false, nullptr},
    {"schedule", LOOM_KIND_SCHEDULE, false, "constant"},
    {"trackers", LOOM_KIND_TRACKER, true, "console"},
    {"hooks", LOOM_KIND_HOOK, true, ""},  // "": none by default
};
const SlotDef kCheckpointSlot = {"checkpoint", LOOM_KIND_CHECKPOINT, false, "safetensors"};

// Splits [checkpoint] into the manager's settings and the backend's own options.
CheckpointSettings take_checkpoint_settings(SlotConfig& slot, const toml::table& table) {
  auto& v = slot.config.values;
  CheckpointSettings s;
  s.enabled = true;
  s.every = std::get<int64_t>(v.at("every"));
  s.keep = std::get<int64_t>(v.at("keep"));
  s.keep_every = std::get<int64_t>(v.at("keep_every"));
  s.at_end = std::get<bool>(v.at("at_end"));
  s.async = std::get<bool>(v.at("async"));
  s.resume = std::get<std::string>(v.at("resume"));
  s.dir = std::get<std::string>(v.at("dir"));
  for (const auto& o : checkpoint_options()) v.erase(o.name);
  const auto at = [&](const char* key) {
    const toml::node* n = table.get(key);
    return n ? source_position(*n) : source_position(table);
  };
  if (s.every < 0) throw usage_failure(at("every") + ": [checkpoint] every must be >= 0");
  if (s.keep < 1) throw usage_failure(at("keep") + ": [checkpoint] keep must be at least 1");
  if (s.keep_every < 0) throw usage_failure(at("keep_every") + ": [checkpoint] keep_every must be >= 0");
  if (s.resume.empty()) throw usage_failure(at("resume") + ": [checkpoint] resume must be \"auto\", \"none\" or a path");
  return s;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

SlotConfig resolve_slot(const std::string& slot, const SlotDef& def, const toml::table& table,
                        const Registry& registry, toml::table& resolved_out,
                        const std::vector<OptionSpec>& host_options = {}, const char* default_use = nullptr) {
  const auto* use = table.get("use");
  const std::string installed = join(registry.names(def.kind));
  if (use == nullptr && default_use == nullptr)
    throw usage_failure(source_position(table) + ": [" + slot + "]: missing use = \"<" + kind_name(def.kind) +
                        " name>\" (installed " + kind_name(def.kind) + "s: " + installed + ")");
  auto name = use ? use->value_exact<std::string>() : std::optional<std::string>(default_use);
  if (!name) throw usage_failure(source_position(*use) + ": [" + slot + "]: use must be a string");
  const Component* component = registry.lookup(def.kind, *name);
  if (component == nullptr) {
    std::string hint = did_you_mean(*name, registry.names(def.kind));
    for (const Component* other : registry.named(*name))
      hint += std::string("; \"") + *name + "\" is a " + kind_name(other->kind) + ", not a " + kind_name(def.kind);
    throw usage_failure((use ? source_position(*use) : source_position(table)) + ": [" + slot + "]: no " + kind_name(def.kind) + " named \"" +
                        *name + "\"" + hint + " (installed: " + installed +
                        "; `host plugins` lists every plugin and where it looked)");
  }
  SlotConfig out{slot, component, {}};
  std::vector<OptionSpec> specs = host_options;  // host-side options of the slot come first
  for (const auto& o : component->options)
    if (std::none_of(specs.begin(), specs.end(), [&](const OptionSpec& h) { return h.name == o.name; }))
      specs.push_back(o);
  out.config.values = resolve_options(table, specs, "[" + slot + "] " + *name,
                                      "see `host describe " + *name + "`", {"use"});
  resolved_out.insert_or_assign("use", *name);
  for (const auto& [key, value] : out.config.values)
    std::visit([&](const auto& v) { resolved_out.insert_or_assign(key, v); }, value);
  return out;
}

RunSettings read_run(const toml::table& root, toml::table& resolved) {
  toml::table empty;
  const toml::table* table = root.get_as<toml::table>("run");
  if (root.get("run") && !table) throw usage_failure(source_position(*root.get("run")) + ": run must be a table");
  auto values = resolve_options(table ? *table : empty, run_options(), "[run]",
                                "README \"Manifest reference\" lists [run] options", {});
  toml::table out;
  for (const auto& [key, value] : values) std::visit([&](const auto& v) { out.insert_or_assign(key, v); }, value);
  resolved.insert_or_assign("run", out);

  RunSettings run;
  run.name = std::get<std::string>(values["name"]);
  run.dir = std::get<std::string>(values["dir"]);
  run.seed = static_cast<uint64_t>(std::get<int64_t>(values["seed"]));
  run.steps = std::get<int64_t>(values["steps"]);
  run.grad_accum = std::get<int64_t>(values["grad_accum"]);
  run.log_every = std::get<int64_t>(values["log_every"]);
  run.threads = std::get<int64_t>(values["threads"]);
  run.cpu_memory_cache = std::get<bool>(values["cpu_memory_cache"]);
  run.deterministic = std::get<bool>(values["deterministic"]);
  run.clip_grad_norm = std::get<double>(values["clip_grad_norm"]);
  run.peak_flops = std::get<double>(values["peak_flops"]);
  const auto at = [&](const char* key) {
    const toml::node* n = table ? table->get(key) : nullptr;
    return n ? source_position(*n) : std::string("[run]");
  };
  run.device = std::get<std::string>(values["device"]);
  run.device_at = at("device");
  run.precision = parse_precision(std::get<std::string>(values["precision"]), at("precision"));
  if (run.steps < 1) throw usage_failure(at("steps") + ": [run] steps must be at least 1");
  if (run.grad_accum < 1) throw usage_failure(at("grad_accum") + ": [run] grad_accum must be at least 1");
  if (run.log_every < 1) throw usage_failure(at("log_every") + ": [run] log_every must be at least 1");
  if (run.clip_grad_norm < 0) throw usage_failure(at("clip_grad_norm") + ": [run] clip_grad_norm must be >= 0");
  if (run.name.empty() || run.name.find('/') != std::string::npos)
    throw usage_failure(at("name") + ": [run] name must be a non-empty folder name without '/'");
  return run;
}

}  // namespace

std::vector<PluginDir> manifest_plugin_dirs(const Manifest& manifest) {
  std::vector<PluginDir> dirs;
  const auto* plugins = manifest.root.get("plugins");
  if (!plugins) return dirs;
  const auto* table = plugins->as_table();
  if (!table) throw usage_failure(source_position(*plugins) + ": plugins must be a table with paths = [...]");
  for (const auto& [key, node] : *table) {
    if (key.str() != "paths")
      throw usage_failure(source_position(node) + ": [plugins]: unknown option \"" + std::string(key.str()) +
                          "\"" + did_you_mean(std::string(key.str()), {"paths"}) + " (only paths is known)");
    const auto* array = node.as_array();
    if (!array) throw usage_failure(source_position(node) + ": [plugins] paths must be an array of strings");
    for (const auto& item : *array) {
      auto text = item.value<std::string>();
      if (!text) throw usage_failure(source_position(item) + ": [plugins] paths must hold strings");
      fs::path p(*text);
      // Relative to the manifest that wrote the entry, which may be a base reached by extends.
      const auto& source = item.source().path;
      const fs::path origin = source && source->rfind("--set ", 0) != 0 ? fs::path(*source) : manifest.path;
      if (p.is_relative()) p = origin.parent_path() / p;
      dirs.push_back({p, source_position(item)});
    }
  }
  return dirs;
}

PipelineConfig resolve_pipeline(const Manifest& manifest, const Registry& registry) {
  PipelineConfig out;
  out.registry = &registry;
  out.run = read_run(manifest.root, out.resolved);
  if (const auto* plugins = manifest.root.get("plugins")) out.resolved.insert_or_assign("plugins", *plugins);

  for (const SlotDef& def : kSlots) {
    const toml::node* node = manifest.root.get(def.key);
    if (!def.many) {
      SlotConfig* target = def.kind == LOOM_KIND_MODEL     ? &out.model
                           : def.kind == LOOM_KIND_DATASET ? &out.data
                           : def.kind == LOOM_KIND_OPTIMIZER ? &out.optimizer
                                                             : &out.schedule;
      toml::table defaults;
      const toml::table* table = node ? node->as_table() : nullptr;
      if (node && !table) throw usage_failure(source_position(*node) + ": " + def.key + " must be a table");
      if (!node) {
        if (!def.default_use)
          throw usage_failure(manifest.path.string() + ": missing [" + def.key + "] table; add one with use = \"<" +
                              kind_name(def.kind) + " name>\" (installed: " + join(registry.names(def.kind)) + ")");
        defaults.insert("use", def.default_use);
        table = &defaults;
      }
      toml::table resolved;
      *target = resolve_slot(def.key, def, *table, registry, resolved);
      out.resolved.insert_or_assign(def.key, resolved);
      continue;
    }
    std::vector<SlotConfig>& list = def.kind == LOOM_KIND_TRACKER ? out.trackers : out.hooks;
    toml::array resolved_list;
    toml::array defaults;
    const toml::array* array = node ? node->as_array() : nullptr;
    if (node && !array)
      throw usage_failure(source_position(*node) + ": " + def.key + " must be an array of tables: write [[" +
                          def.key + "]]");
    if (!node && *def.default_use) defaults.push_back(toml::table{{"use", def.default_use}});
    for (size_t i = 0; i < (array ? array : &defaults)->size(); ++i) {
      const toml::node& item = *(array ? array : &defaults)->get(i);
      const toml::table* table = item.as_table();
      if (!table) throw usage_failure(source_position(item) + ": each " + def.key + " entry must be a table");
      toml::table resolved;
      const bool tracker = def.kind == LOOM_KIND_TRACKER;
      list.push_back(resolve_slot(std::string(def.key) + "[" + std::to_string(i) + "]", def, *table, registry,
                                  resolved, tracker ? tracker_options() : std::vector<OptionSpec>{}));
      if (tracker) {
        auto& values = list.back().config.values;
        list.back().required = std::get<bool>(values.at("required"));
        values.erase("required");
      }
      resolved_list.push_back(resolved);
    }
    out.resolved.insert_or_assign(def.key, resolved_list);
  }
  if (const toml::node* node = manifest.root.get("distributed")) {
    const toml::table* table = node->as_table();
    if (!table) throw usage_failure(source_position(*node) + ": distributed must be a table");
    auto values = resolve_options(*table, distributed_options(), "[distributed]",
                                  "README \"Manifest reference\" lists [distributed] options", {});
    out.distributed.backend = std::get<std::string>(values.at("backend"));
    out.distributed.bucket_mb = std::get<double>(values.at("bucket_mb"));
    out.distributed.timeout_s = std::get<double>(values.at("timeout_s"));
    if (out.distributed.backend != "auto" && out.distributed.backend != "gloo" && out.distributed.backend != "nccl")
      throw usage_failure(source_position(*table) + ": [distributed] backend must be \"auto\", \"gloo\" or \"nccl\"");
    if (out.distributed.bucket_mb <= 0 || out.distributed.timeout_s <= 0)
      throw usage_failure(source_position(*table) + ": [distributed] bucket_mb and timeout_s must be > 0");
    toml::table resolved;
    for (const auto& [key, value] : values) std::visit([&](const auto& v) { resolved.insert_or_assign(key, v); }, value);
    out.resolved.insert_or_assign("distributed", resolved);
  }
  if (const toml::node* node = manifest.root.get("eval_data")) {
    const toml::table* table = node->as_table();
    if (!table) throw usage_failure(source_position(*node) + ": eval_data must be a table");
    const SlotDef def = {"eval_data", LOOM_KIND_DATASET, false, nullptr};
    toml::table resolved;
    out.eval_data = resolve_slot("eval_data", def, *table, registry, resolved, eval_data_options());
    auto& values = out.eval_data->config.values;
    out.eval_max_batches = std::get<int64_t>(values.at("max_batches"));
    values.erase("max_batches");
    if (out.eval_max_batches < 1)
      throw usage_failure(source_position(*table) + ": [eval_data] max_batches must be at least 1");
    out.resolved.insert_or_assign("eval_data", resolved);
  }
  if (const toml::node* node = manifest.root.get("checkpoint")) {
    const toml::table* table = node->as_table();
    if (!table) throw usage_failure(source_position(*node) + ": checkpoint must be a table");
    toml::table resolved;
    out.checkpoint_backend = resolve_slot("checkpoint", kCheckpointSlot, *table, registry, resolved,
                                          checkpoint_options(), kCheckpointSlot.default_use);
    out.checkpoint = take_checkpoint_settings(out.checkpoint_backend, *table);
    out.resolved.insert_or_assign("checkpoint", resolved);
  }
  return out;
}

}  // namespace loom
