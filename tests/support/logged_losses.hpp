// logged_losses.hpp: the losses a run logged, read back from its metrics.jsonl (the jsonl
// tracker), and a one-call "train this manifest and give me its losses" for tests.
#pragma once

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "run_host.hpp"

namespace loom_test {

// The "loss" of every record in run_dir/metrics.jsonl, in order.
inline std::vector<double> logged_losses(const std::filesystem::path& run_dir) {
  std::vector<double> losses;
  std::istringstream lines(read_file(run_dir / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) losses.push_back(nlohmann::json::parse(line).at("loss"));
  return losses;
}

// `host run MANIFEST` into dir/name with extra arguments (--set ...); requires exit 0.
inline std::vector<double> train_losses(const std::string& manifest, const std::filesystem::path& dir,
                                        const std::string& name, const std::string& extra) {
  const Result r = run_host("run " + manifest + " --set run.dir=\"" + dir.string() + "\" --set run.name=" + name +
                            " " + extra);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return logged_losses(dir / name);
}

}  // namespace loom_test
