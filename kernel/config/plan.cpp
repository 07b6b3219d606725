#include "config/plan.hpp"

#include <algorithm>

#include "base/failure.hpp"
#include "config/cross_checks.hpp"
#include "config/host_tables.hpp"
#include "config/options.hpp"
#include "config/resume_check.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

// A slot whose table also holds host options: those of a host table, whose settings the
// slot's `keep` stores in the plan.
template <class Settings>
SlotDef with_host_options(SlotDef def, const HostTable<Settings>& table,
                          std::function<void(RunPlan&, SlotConfig&, const Settings&)> keep) {
  def.host_options = table.specs();
  def.take_host_options = [&table, keep](RunPlan& plan, SlotConfig& slot, const toml::table& source) {
    Settings settings;
    table.take(slot.config.values, &source, settings);
    keep(plan, slot, settings);
  };
  return def;
}

std::vector<SlotDef> make_slots() {
  return {
      with_host_options<ModelInitSettings>({"model", LOOM_KIND_MODEL, nullptr, nullptr, &RunPlan::model}, model_table(),
                                           [](RunPlan& plan, SlotConfig&, const auto& s) { plan.model_init = s; }),
      {"data", LOOM_KIND_DATASET, nullptr, nullptr, &RunPlan::data},
      {"optimizer", LOOM_KIND_OPTIMIZER, nullptr, nullptr, &RunPlan::optimizer},
      {"sparse_optimizer", LOOM_KIND_OPTIMIZER, "", nullptr, &RunPlan::sparse_optimizer},
      {"schedule", LOOM_KIND_SCHEDULE, "constant", nullptr, &RunPlan::schedule},
      with_host_options<TrackerSettings>({"trackers", LOOM_KIND_TRACKER, "console", nullptr, nullptr, &RunPlan::trackers},
                                         tracker_table(),
                                         [](RunPlan&, SlotConfig& slot, const auto& s) {
                                           slot.required = s.required;
                                           slot.every_rank = s.every_rank;
                                         }),
      {"hooks", LOOM_KIND_HOOK, "", nullptr, nullptr, &RunPlan::hooks},
      with_host_options<CheckpointSettings>({"checkpoint", LOOM_KIND_CHECKPOINT, "", "safetensors",
                                             &RunPlan::checkpoint_backend},
                                            checkpoint_table(),
                                            [](RunPlan& plan, SlotConfig&, const auto& s) {
                                              plan.checkpoint = s;
                                              plan.checkpoint.enabled = true;
                                            }),
      with_host_options<EvalSettings>({"eval_data", LOOM_KIND_DATASET, "", nullptr, &RunPlan::eval_data},
                                      eval_data_table(),
                                      [](RunPlan& plan, SlotConfig&, const auto& s) { plan.eval = s; }),
  };
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

void insert_values(toml::table& out, const std::map<std::string, OptionValue>& values) {
  // Not a structured binding: C++17 lambdas cannot capture one (clang refuses; the fuzz build is clang).
  for (const auto& item : values)
    std::visit(
        [&](const auto& v) {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::vector<std::string>>)
            out.insert_or_assign(item.first, toml_array(v));
          else out.insert_or_assign(item.first, v);
        },
        item.second);
}

// One slot table: the component that `use` names (or the slot's default) with its options
// resolved, the slot's host options first. The resolved table goes to resolved_out.
SlotConfig resolve_slot(const std::string& slot, const SlotDef& def, const toml::table& table,
                        const Registry& registry, toml::table& resolved_out) {
  const auto* use = table.get("use");
  const std::string kind = kind_name(def.kind);
  const std::string installed = join(registry.names(def.kind));
  if (use == nullptr && def.use_default == nullptr)
    throw usage_failure(source_position(table) + ": [" + slot + "]: missing use = \"<" + kind + " name>\" (installed " +
                        kind + "s: " + installed + ")");
  auto name = use ? use->value_exact<std::string>() : std::optional<std::string>(def.use_default);
  if (!name) throw usage_failure(source_position(*use) + ": [" + slot + "]: use must be a string");
  const Component* component = registry.lookup(def.kind, *name);
  if (component == nullptr) {
    std::string hint = did_you_mean(*name, registry.names(def.kind));
    for (const Component* other : registry.named(*name))
      hint += std::string("; \"") + *name + "\" is a " + kind_name(other->kind) + ", not a " + kind;
    throw UnknownComponent((use ? source_position(*use) : source_position(table)) + ": [" + slot + "]: no " + kind +
                        " named \"" + *name + "\"" + hint + " (installed: " + installed +
                        "; `host plugins` lists every plugin and where it looked)");
  }
  SlotConfig out{slot, component, {}};
  std::vector<OptionSpec> specs = def.host_options;
  for (const auto& o : component->options)
    if (std::none_of(specs.begin(), specs.end(), [&](const OptionSpec& h) { return h.name == o.name; }))
      specs.push_back(o);
  out.config.values = resolve_options(table, specs, "[" + slot + "] " + *name,
                                      "see `host describe " + *name + "`", {"use"});
  resolved_out.insert_or_assign("use", *name);
  insert_values(resolved_out, out.config.values);
  return out;
}

// A table of [[trackers]] or [model]: resolved into the plan, host options taken out.
void resolve_slot_table(RunPlan& plan, const SlotDef& def, const std::string& slot, const toml::table& table,
                        const Registry& registry, toml::table& resolved) {
  SlotConfig config = resolve_slot(slot, def, table, registry, resolved);
  if (def.take_host_options) def.take_host_options(plan, config, table);
  if (def.one) plan.*def.one = std::move(config);
  else (plan.*def.many).push_back(std::move(config));
}

void resolve_single_slot(RunPlan& plan, const SlotDef& def, const Manifest& manifest, const Registry& registry,
                         toml::table& resolved_manifest) {
  const toml::node* node = manifest.root.get(def.key);
  if (!node && def.when_absent == nullptr)
    throw usage_failure(manifest.path.string() + ": missing [" + def.key + "] table; add one with use = \"<" +
                        kind_name(def.kind) + " name>\" (installed: " + join(registry.names(def.kind)) + ")");
  if (!node && !*def.when_absent) return;  // the slot stays empty
  const toml::table* table = node ? node->as_table() : nullptr;
  if (node && !table) throw usage_failure(source_position(*node) + ": " + def.key + " must be a table");
  toml::table defaults;
  if (!table) defaults.insert("use", def.when_absent);
  toml::table resolved;
  resolve_slot_table(plan, def, def.key, table ? *table : defaults, registry, resolved);
  resolved_manifest.insert_or_assign(def.key, std::move(resolved));
}

void resolve_array_slot(RunPlan& plan, const SlotDef& def, const Manifest& manifest, const Registry& registry,
                        toml::table& resolved_manifest) {
  const toml::node* node = manifest.root.get(def.key);
  const toml::array* array = node ? node->as_array() : nullptr;
  if (node && !array)
    throw usage_failure(source_position(*node) + ": " + def.key + " must be an array of tables: write [[" + def.key +
                        "]]");
  toml::array defaults;
  if (!node && *def.when_absent) defaults.push_back(toml::table{{"use", def.when_absent}});
  const toml::array& entries = array ? *array : defaults;
  toml::array resolved_list;
  for (size_t i = 0; i < entries.size(); ++i) {
    const toml::table* table = entries.get(i)->as_table();
    if (!table)
      throw usage_failure(source_position(*entries.get(i)) + ": each " + def.key + " entry must be a table");
    toml::table resolved;
    resolve_slot_table(plan, def, std::string(def.key) + "[" + std::to_string(i) + "]", *table, registry, resolved);
    resolved_list.push_back(std::move(resolved));
  }
  resolved_manifest.insert_or_assign(def.key, std::move(resolved_list));
}

// A table the host reads alone ([run], [distributed]); always: resolve it even when absent.
template <class Settings>
void resolve_host_table(const toml::table& root, const HostTable<Settings>& host_table, bool always,
                        Settings& out, toml::table& resolved) {
  const toml::node* node = root.get(host_table.name);
  const toml::table* table = node ? node->as_table() : nullptr;
  if (node && !table) throw usage_failure(source_position(*node) + ": " + host_table.name + " must be a table");
  if (!node && !always) return;
  const toml::table empty;
  auto values = resolve_options(table ? *table : empty, host_table.specs(), host_table.title,
                                std::string("README \"Manifest reference\" lists ") + host_table.title + " options",
                                {});
  toml::table resolved_table;
  insert_values(resolved_table, values);
  resolved.insert_or_assign(host_table.name, std::move(resolved_table));
  host_table.take(values, table, out);
}

// [run] and the rules between its own options.
void resolve_run_table(const Manifest& manifest, RunPlan& plan, toml::table& resolved) {
  resolve_host_table(manifest.root, run_table(), /*always=*/true, plan.run, resolved);
  if (plan.run.epochs > 0) {
    const toml::table* run = manifest.root.get_as<toml::table>("run");
    const toml::node* steps = run ? run->get("steps") : nullptr;
    if (steps)
      throw usage_failure(source_position(*steps) + ": [run] sets both steps and epochs; keep one (epochs derives the "
                          "steps from the dataset's epoch length)");
    if (plan.run.global_batch_size > 0)
      throw usage_failure(source_position(*run) + ": [run] epochs and global_batch_size cannot be combined yet; set "
                          "grad_accum instead of global_batch_size");
  }
  if (plan.run.global_batch_size > 0 && plan.run.grad_accum != 1) {
    const toml::node* run = manifest.root.get("run");
    throw usage_failure((run ? source_position(*run) : manifest.path.string()) +
                        ": [run] sets both global_batch_size and grad_accum; keep one (global_batch_size derives "
                        "grad_accum)");
  }
}

// The schedule scales the optimizer's "lr"; an optimizer without one would train at 1.0.
void check_optimizer_lr(const Manifest& manifest, const SlotConfig& optimizer) {
  if (optimizer.component == nullptr) return;
  const std::string slot = optimizer.slot;
  const auto lr = optimizer.config.values.find("lr");
  if (lr == optimizer.config.values.end() || !std::holds_alternative<double>(lr->second))
    throw plugin_failure("optimizer " + optimizer.component->name + " (" + optimizer.component->plugin->path +
                         ") declares no float option \"lr\", which the host reads as the base learning rate the "
                         "schedule scales; the plugin must declare loom::option(\"lr\", LOOM_OPTION_TYPE_FLOAT, ...)");
  if (std::get<double>(lr->second) < 0) {
    const toml::node* node = manifest.root.at_path(slot + ".lr").node();
    throw usage_failure((node ? source_position(*node) : manifest.path.string()) + ": [" + slot + "] lr = " +
                        format_option_value(std::get<double>(lr->second)) + " is negative; a learning rate is >= 0");
  }
}

}  // namespace

const std::vector<SlotDef>& manifest_slots() {
  static const std::vector<SlotDef> slots = make_slots();
  return slots;
}

std::vector<std::string> manifest_tables() {
  std::vector<std::string> out = {"extends", run_table().name, "plugins"};
  for (const SlotDef& def : manifest_slots()) out.push_back(def.key);
  out.push_back(export_table().name);
  out.push_back(distributed_table().name);
  out.push_back(lora_table().name);
  return out;
}

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

RunPlan resolve_plan(const Manifest& manifest, const Registry& registry, std::vector<std::string>* errors) {
  // Runs one part of the resolution; in collecting mode a usage problem is noted and the next
  // part is tried.
  const auto attempt = [&](const auto& part) {
    try {
      part();
    } catch (const Failure& f) {
      if (errors == nullptr || f.code() != ExitCode::usage) throw;
      errors->push_back(f.what());
    }
  };
  RunPlan plan;
  plan.registry = &registry;
  toml::table resolved;  // every table with its defaults filled in
  attempt([&] { resolve_run_table(manifest, plan, resolved); });
  attempt([&] {
    if (!manifest.root.get("plugins")) return;
    // Absolute, as resolved: the copy in the run folder must load the same .so files when it
    // is run from there, not whatever a relative path finds next to it.
    toml::array paths;
    for (const PluginDir& dir : manifest_plugin_dirs(manifest))
      paths.push_back(fs::absolute(dir.path).lexically_normal().string());
    resolved.insert_or_assign("plugins", toml::table{{"paths", std::move(paths)}});
  });
  for (const SlotDef& def : manifest_slots())
    attempt([&] {
      if (def.one) resolve_single_slot(plan, def, manifest, registry, resolved);
      else resolve_array_slot(plan, def, manifest, registry, resolved);
    });
  attempt([&] { check_optimizer_lr(manifest, plan.optimizer); });
  attempt([&] { check_optimizer_lr(manifest, plan.sparse_optimizer); });
  attempt([&] { resolve_host_table(manifest.root, distributed_table(), /*always=*/false, plan.distributed, resolved); });
  attempt([&] { resolve_host_table(manifest.root, lora_table(), /*always=*/false, plan.lora, resolved); });
  attempt([&] { resolve_host_table(manifest.root, export_table(), /*always=*/false, plan.hf_export, resolved); });
  for (const std::string& problem : cross_section_problems(plan, manifest)) {
    if (errors == nullptr) throw usage_failure(problem);
    errors->push_back(problem);
  }
  plan.hf_export.enabled = manifest.root.get(export_table().name) != nullptr;
  plan.lora.enabled = manifest.root.get(lora_table().name) != nullptr;
  plan.resolved_manifest = to_toml_text(resolved);
  plan.manifest_changes = [current = plan.resolved_manifest](const std::string& saved, const std::string& checkpoint,
                                                              int saved_world, int current_world) {
    return check_resume_manifest(saved, current, checkpoint, saved_world, current_world);
  };
  return plan;
}

}  // namespace loom
