#include "abi/tensor_parallel_collective.hpp"

#include <loom/torch.hpp>

#include <atomic>
#include <string>

#include "abi/host_api.hpp"
#include "base/failure.hpp"

namespace loom {
namespace {

std::atomic<TensorParallelCollectives*> g_group{nullptr};

}  // namespace

void set_tensor_parallel_collectives(TensorParallelCollectives* group) { g_group.store(group); }

loom_status* tensor_parallel_collective(loom_collective_args* args) {
  const auto fail = [](loom_status_code code, const std::string& message) {
    return host_api()->status_create(code, message.c_str());
  };
  if (args == nullptr || args->input == nullptr || args->output == nullptr)
    return fail(LOOM_STATUS_CODE_INVALID_ARGUMENT, "tensor_parallel_collective: args, input and output must be set");
  try {
    const at::Tensor& x = tensor(args->input);
    at::Tensor& out = tensor(args->output);
    if (!x.defined()) return fail(LOOM_STATUS_CODE_INVALID_ARGUMENT, "tensor_parallel_collective: no input tensor");
    TensorParallelCollectives* group = g_group.load();
    switch (args->op) {
      case LOOM_COLLECTIVE_ALL_REDUCE_SUM:
      case LOOM_COLLECTIVE_ALL_REDUCE_MAX:
        out = group ? group->all_reduce(x, args->op == LOOM_COLLECTIVE_ALL_REDUCE_MAX) : x.clone();
        return nullptr;
      case LOOM_COLLECTIVE_ALL_GATHER:
        out = group ? group->all_gather(x) : x.clone();
        return nullptr;
      default:
        return fail(LOOM_STATUS_CODE_INVALID_ARGUMENT,
                    "tensor_parallel_collective: unknown op " + std::to_string(args->op));
    }
  } catch (const std::exception& e) {
    return fail(LOOM_STATUS_CODE_INTERNAL, e.what());
  }
}

}  // namespace loom
