#include "train/tensor_parallel.hpp"

#include "base/failure.hpp"

namespace loom {

TensorParallel::TensorParallel(Communicator& world, const DeviceMesh& mesh) : mesh_(mesh) {
  // Only a group's own ranks meet under its name (each group has its own store prefix).
  tensor_ = std::make_unique<Communicator>(world, mesh.tensor_group(), "tensor" + std::to_string(mesh.data_rank()));
  if (mesh.data() > 1)
    data_ = std::make_unique<Communicator>(world, mesh.data_group(), "data" + std::to_string(mesh.tensor_rank()));
  set_tensor_parallel_collectives(this);
}

TensorParallel::~TensorParallel() { set_tensor_parallel_collectives(nullptr); }

at::Tensor TensorParallel::all_reduce(const at::Tensor& x, bool max) {
  at::Tensor out = x.clone();
  if (max) tensor_->allreduce_max(out);
  else tensor_->allreduce_sum(out);
  return out;
}

at::Tensor TensorParallel::all_gather(const at::Tensor& x) {
  if (x.dim() == 0) throw runtime_failure("tensor_parallel_collective: all-gather takes a tensor of rank 1 or more");
  const int64_t rows = x.size(0);
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = rows * mesh_.tensor;
  at::Tensor out = at::empty(shape, x.options());
  out.narrow(0, mesh_.tensor_rank() * rows, rows).copy_(x);
  tensor_->allgather_chunks(out);
  return out;
}

void TensorParallel::check_model_splits(const std::vector<ModelParam>& params, const std::string& model, int tensor) {
  for (const ModelParam& p : params)
    if (p.split_dim >= 0) return;
  throw usage_failure("[distributed] tensor_parallel = " + std::to_string(tensor) + ": model " + model +
                      " split none of its parameters (loom/tensor_parallel.hpp), so every rank would train the whole "
                      "model; use a model that declares a tensor-parallel layout (llama, hf_causal_lm) or "
                      "tensor_parallel = 1");
}

std::set<std::string> TensorParallel::whole_params(const std::vector<ModelParam>& params) {
  std::set<std::string> out;
  for (const ModelParam& p : params)
    if (p.split_dim < 0) out.insert(p.name);
  return out;
}

at::Tensor TensorParallel::grad_norm_from(const at::Tensor& all, const at::Tensor& whole) {
  at::Tensor squares = (all - whole * (1.0 - 1.0 / mesh_.tensor)).reshape({1});
  tensor_->allreduce_sum(squares);
  return squares.reshape({}).sqrt();
}

}  // namespace loom
