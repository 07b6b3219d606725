// basic_commands.cpp: `host run`, `host validate`, `host eval` and `host plugins`.
#include "cli/commands.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "abi/host_api.hpp"
#include "abi/plugin_loader.hpp"
#include "base/failure.hpp"
#include "base/log.hpp"
#include "base/signals.hpp"
#include "base/writer_guard.hpp"
#include "config/manifest.hpp"
#include "cli/run_folder.hpp"
#include "cli/run_lock.hpp"
#include "config/plan.hpp"
#include "dist/dist_env.hpp"
#include "train/evaluate_checkpoint.hpp"
#include "train/trainer.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

struct Loaded {
  Manifest manifest;
  Registry registry;
  RunPlan plan;
};

// A plugin file that failed to load explains a component the manifest names but nobody
// offers; when the manifest needs nothing missing, it is only a warning.
[[noreturn]] void explain_unknown(const UnknownComponent& f, const std::vector<const PluginRecord*>& broken) {
  if (broken.empty()) throw f;
  throw plugin_failure(broken.front()->error + " (the manifest needs a component no loaded plugin offers: " +
                       f.what() + ")");
}

void warn_skipped(const std::vector<const PluginRecord*>& broken) {
  for (const PluginRecord* p : broken) spdlog::warn("skipped a plugin this manifest does not need: {}", p->error);
}

std::unique_ptr<Loaded> load_everything(const std::string& path, const std::vector<std::string>& overrides) {
  auto out = std::make_unique<Loaded>();
  out->manifest = load_manifest(path, overrides);
  const auto broken = load_plugins_for_manifest(out->registry, plugin_search_path(manifest_plugin_dirs(out->manifest)));
  try {
    out->plan = resolve_plan(out->manifest, out->registry);
  } catch (const UnknownComponent& f) {
    explain_unknown(f, broken);
  }
  warn_skipped(broken);
  return out;
}

// The run's log file, beside the other ranks': rank 0 after it took the folder's lock, the
// others once every rank met (so a rank of a second job on a locked folder writes nothing).
void join_run_log(const fs::path& run_dir, const DistEnv& env) {
  std::error_code ec;
  fs::create_directories(run_dir / "logs", ec);
  if (ec) throw runtime_failure(run_dir.string() + ": cannot create the run's logs folder: " + ec.message());
  if (env.world_size > 1)
    log_join_run(env.rank, env.world_size, (run_dir / "logs" / ("rank-" + std::to_string(env.rank) + ".log")).string());
}

}  // namespace

int command_run(const CommandLine& line) {
  const DistEnv env = read_dist_env();
  stop_with_launcher(env.rank);
  if (env.world_size > 1) log_setup(env.rank, env.world_size, line.verbose);
  auto loaded = load_everything(line.args.at(0), line.overrides);
  const RunSettings& run = loaded->plan.run;
  check_run_plan(loaded->plan, env);  // nothing is written before every manifest check passed
  const fs::path run_dir = fs::path(run.dir) / run.name;
  // Rank 0 alone takes the lock and checks the folder; the others write nothing until they met
  // rank 0, which holds the lock by then.
  std::unique_ptr<RunFolderLock> lock;
  if (env.rank == 0) {
    lock = std::make_unique<RunFolderLock>(run_dir);
    check_run_folder(run_dir, loaded->plan, line.overwrite);
    join_run_log(run_dir, env);
    std::ofstream out(run_dir / "manifest.toml");  // shared outputs come from rank 0 alone
    out << "# Resolved manifest of this run: every default filled in.\n" << loaded->plan.resolved_manifest << "\n";
    if (!out) throw runtime_failure((run_dir / "manifest.toml").string() + ": cannot write the resolved manifest");
    write_run_status(run_dir, "running");
  }
  spdlog::info("run {}: {} steps, writing to {}", run.name, run.steps, run_dir.string());
  TrainSummary s;
  try {
    s = train(loaded->plan, run_dir.string(), env, [&] {
      if (env.rank != 0) join_run_log(run_dir, env);
    });
  } catch (const FolderLost&) {
    throw;  // status.json is the other run's now
  } catch (const Failure& f) {
    if (env.rank == 0) write_run_status(run_dir, "failed", f.what());
    throw;
  }
  if (env.rank == 0) write_run_status(run_dir, SignalWatch::requested() != 0 ? "interrupted" : "finished");
  if (s.already_complete) return static_cast<int>(ExitCode::ok);  // train() said so
  // "loss" is what the log lines show: the mean over a log window (the first and the last).
  spdlog::info("done: {} steps in {:.1f} s ({:.1f} ms/step), loss {:.4f} -> {:.4f}{}", s.steps, s.seconds,
               1e3 * s.seconds / std::max<int64_t>(s.steps, 1), s.first_loss, s.last_loss,
               s.skipped_steps ? ", " + std::to_string(s.skipped_steps) + " steps skipped by hooks" : "");
  return static_cast<int>(ExitCode::ok);
}

int command_validate(const CommandLine& line) {
  // Every problem in one pass: each table, then what the tables say together.
  Manifest manifest = load_manifest(line.args.at(0), line.overrides);
  Registry registry;
  const auto broken = load_plugins_for_manifest(registry, plugin_search_path(manifest_plugin_dirs(manifest)));
  std::vector<std::string> errors;
  const RunPlan plan = resolve_plan(manifest, registry, &errors);
  if (!errors.empty()) {
    for (const std::string& e : errors) std::cerr << "error: " << e << "\n";
    for (const PluginRecord* p : broken) std::cerr << "error: " << p->error << "\n";  // a likely cause
    return static_cast<int>(broken.empty() ? ExitCode::usage : ExitCode::plugin);
  }
  warn_skipped(broken);
  std::cout << "# " << line.args.at(0) << " is valid. Resolved:\n" << plan.resolved_manifest << "\n";
  return static_cast<int>(ExitCode::ok);
}

int command_eval(const CommandLine& line) {
  const DistEnv env = read_dist_env();
  auto loaded = load_everything(line.args.at(0), line.overrides);
  const CheckpointEvaluation e = evaluate_checkpoint(loaded->plan, line.checkpoint, env);
  if (line.json) {
    nlohmann::json out = {{"checkpoint", e.built_by_manifest ? nlohmann::json(nullptr) : nlohmann::json(e.checkpoint.string())},
                          {"step", e.step}, {"metrics", nlohmann::json::object()}};
    for (const auto& [name, value] : e.metrics) out["metrics"][name] = value;
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  if (e.built_by_manifest) std::cout << "no checkpoint: the model as the manifest builds it (step 0)\n";
  else std::cout << e.checkpoint.string() << " (step " << e.step << ")\n";
  for (const auto& [name, value] : e.metrics) std::cout << "  " << std::left << std::setw(20) << name << value << "\n";
  return 0;
}

int command_plugins(const CommandLine& line) {
  const bool json = line.json;
  Registry registry;
  const auto dirs = plugin_search_path({});
  load_plugins(registry, dirs, /*keep_going=*/true);
  if (json) {
    nlohmann::json out = {{"host_abi", std::to_string(LOOM_ABI_MAJOR) + "." + std::to_string(LOOM_ABI_MINOR)},
                          {"host_torch", host_torch_fingerprint()},
                          {"search_path", nlohmann::json::array()},
                          {"plugins", nlohmann::json::array()}};
    for (const auto& d : dirs) out["search_path"].push_back({{"path", d.path.string()}, {"origin", d.origin}});
    for (const auto& p : registry.plugins()) {
      nlohmann::json entry = {{"file", p.path}, {"name", p.name}, {"version", p.version},
                              {"abi", std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor)},
                              {"torch", p.fingerprint.empty() ? "torch-free" : p.fingerprint},
                              {"components", nlohmann::json::array()}};
      if (!p.error.empty()) entry["error"] = p.error;
      for (const Component* c : p.components)
        entry["components"].push_back({{"kind", kind_name(c->kind)}, {"name", c->name}, {"summary", c->summary}});
      out["plugins"].push_back(entry);
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "host ABI " << LOOM_ABI_MAJOR << "." << LOOM_ABI_MINOR << ", " << host_torch_fingerprint() << "\n";
  std::cout << "search path:\n";
  for (const auto& d : dirs) std::cout << "  " << d.path.string() << "  (" << d.origin << ")\n";
  if (dirs.empty()) std::cout << "  (none: set LOOM_PLUGIN_PATH or add [plugins] paths to the manifest)\n";
  for (const auto& p : registry.plugins()) {
    if (!p.error.empty()) {
      std::cout << "\nFAILED " << p.path << "\n  " << p.error << "\n";
      continue;
    }
    std::cout << "\n" << p.name << " " << p.version << "  ABI " << p.abi_major << "." << p.abi_minor << "  "
              << (p.fingerprint.empty() ? "torch-free" : p.fingerprint) << "\n  " << p.path << "\n";
    for (const Component* c : p.components)
      std::cout << "  " << std::left << std::setw(11) << kind_name(c->kind) << std::setw(16) << c->name << c->summary
                << "\n";
  }
  return 0;
}

}  // namespace loom
