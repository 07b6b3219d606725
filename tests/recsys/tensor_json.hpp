// tensor_json.hpp: a tensor as {"shape": [...], "data": [...]} in float64, the form the Python
// references (sparse_reference.py, dlrm_reference.py) read back with torch.tensor(...).reshape.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <vector>

namespace loom_test {

inline nlohmann::json to_json(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kDouble).contiguous();
  return {{"shape", c.sizes().vec()},
          {"data", std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel())}};
}

}  // namespace loom_test
