// moe_folder.hpp: a mixture-of-experts folder as transformers saves it
// (tests/hf_models/moe_reference.py), for the expert-parallel tests on the CPU and the GPU.
#pragma once

#include "torch_doctest.hpp"  // before any torch or doctest header
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "run_host.hpp"

namespace loom_test {

// dir/arch: a random `arch` model (seed 3), with the router's aux loss in the training loss or not.
inline std::filesystem::path moe_folder(const std::filesystem::path& dir, const std::string& arch, bool aux_in_loss) {
  const std::filesystem::path folder = dir / arch;
  const auto written = run_shell(std::string(LOOM_PYTHON) + " " + LOOM_SOURCE_DIR +
                                 "/tests/hf_models/moe_reference.py write --arch " + arch + " --out " +
                                 folder.string() + " --seed 3");
  REQUIRE_MESSAGE(written.code == 0, written.err);
  nlohmann::json config = nlohmann::json::parse(read_file(folder / "config.json"));
  config["output_router_logits"] = aux_in_loss;
  std::ofstream(folder / "config.json") << config.dump(2);
  return folder;
}

}  // namespace loom_test
