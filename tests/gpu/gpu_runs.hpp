// gpu_runs.hpp: what the gpu_tests sources share: the manifests they train and a run's losses.
#pragma once

#include "torch_doctest.hpp"  // before any torch or doctest header

#include <filesystem>
#include <string>
#include <vector>

#include "logged_losses.hpp"
#include "run_host.hpp"

namespace loom_gpu_test {

inline const std::string kGptTiny = std::string(LOOM_SOURCE_DIR) + "/configs/gpt-tiny.toml";
inline const std::string kLlamaTiny = std::string(LOOM_SOURCE_DIR) + "/configs/llama-tiny.toml";
inline const std::string kQuickstart = std::string(LOOM_SOURCE_DIR) + "/configs/quickstart.toml";

// `host run manifest` into dir/name with --set arguments; its logged losses (exit 0 required).
inline std::vector<double> train(const std::string& manifest, const std::string& name, const std::string& sets,
                                 const std::filesystem::path& dir) {
  return loom_test::train_losses(manifest, dir, name, sets);
}

}  // namespace loom_gpu_test
