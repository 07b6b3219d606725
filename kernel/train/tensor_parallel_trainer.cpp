#include "train/tensor_parallel_trainer.hpp"

#include "base/failure.hpp"

namespace loom {

void TensorParallel::check_model_splits(const std::vector<ModelParam>& params, const std::string& model, int tensor) {
  for (const ModelParam& p : params)
    if (p.split.dim >= 0) return;
  throw usage_failure("[distributed] tensor_parallel = " + std::to_string(tensor) + ": model " + model +
                      " split none of its parameters (loom/tensor_parallel.hpp), so every rank would train the whole "
                      "model; use a model that declares a tensor-parallel layout (llama, hf_causal_lm) or "
                      "tensor_parallel = 1");
}

std::set<std::string> TensorParallel::whole_params(const std::vector<ModelParam>& params) {
  std::set<std::string> out;
  for (const ModelParam& p : params)
    if (p.split.dim < 0) out.insert(p.name);
  return out;
}

at::Tensor TensorParallel::grad_norm_from(const at::Tensor& all, const at::Tensor& whole) {
  at::Tensor squares = (all - whole * (1.0 - 1.0 / mesh_.tensor)).reshape({1});
  tensor_.allreduce_sum(squares);
  return squares.reshape({}).sqrt().to(at::kFloat);
}

}  // namespace loom
