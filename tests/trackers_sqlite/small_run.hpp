// small_run.hpp: a small, fast, deterministic manifest (mlp_lm on synthetic bytes) for the
// tracker tests, with the jsonl tracker and any extra tables appended.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace loom_test {

// Writes <dir>/<file> and returns its path; the run directory is <dir>/<name>.
inline std::string small_manifest(const std::filesystem::path& dir, const std::string& name, int steps,
                                  int log_every, const std::string& extra = "",
                                  const std::string& file = "m.toml") {
  const std::filesystem::path path = dir / file;
  std::ofstream(path) << "[run]\nname = \"" << name << "\"\ndir = \"" << dir.string() << "\"\nsteps = " << steps
                      << "\nlog_every = " << log_every << "\nthreads = 1\npeak_flops = 1e9\n"
                      << "[model]\nuse = \"mlp_lm\"\nn_embd = 16\ncontext = 2\nhidden = 32\n"
                         "[data]\nuse = \"synthetic\"\nbatch_size = 4\nseq_len = 16\n"
                         "[optimizer]\nuse = \"adamw\"\nlr = 0.01\n"
                         "[schedule]\nuse = \"constant\"\n"
                         "[[trackers]]\nuse = \"jsonl\"\n"
                      << extra;
  return path.string();
}

}  // namespace loom_test
