// python_torch.hpp: finds a python3 that can `import torch`, for tests that check Loom against
// an independent PyTorch reference (LOOM_PYTHON, .venv's under tools/dev: the same LibTorch).
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "run_host.hpp"

namespace loom_test {

// A python3 that can `import torch`, or "" (with the candidates tried in `tried`).
inline std::string python_with_torch(std::string& tried) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("LOOM_TEST_PYTHON")) candidates.push_back(env);
  candidates.push_back(LOOM_PYTHON);
  for (const std::string& c : candidates) {
    tried += (tried.empty() ? "" : ", ") + c;
    if (run_shell(c + " -c 'import torch'").code == 0) return c;
  }
  return "";
}

}  // namespace loom_test
