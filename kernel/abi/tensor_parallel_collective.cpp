#include "abi/tensor_parallel_collective.hpp"

#include <loom/torch.hpp>

#include <array>
#include <atomic>
#include <string>

#include "abi/host_api.hpp"
#include "base/failure.hpp"

namespace loom {
namespace {

std::array<std::atomic<GroupCollectives*>, 5> g_groups{};  // by loom_collective_group

}  // namespace

void set_group_collectives(loom_collective_group group, GroupCollectives* calls) {
  g_groups.at(static_cast<size_t>(group)).store(calls);
}

loom_status* tensor_parallel_collective(loom_collective_args* args) {
  const auto fail = [](loom_status_code code, const std::string& message) {
    return host_api()->status_create(code, message.c_str());
  };
  if (args == nullptr || args->input == nullptr || args->output == nullptr)
    return fail(LOOM_STATUS_CODE_INVALID_ARGUMENT, "tensor_parallel_collective: args, input and output must be set");
  const int32_t group = LOOM_STRUCT_HAS(args, loom_collective_args, group) ? args->group : LOOM_COLLECTIVE_GROUP_TENSOR;
  if (group != LOOM_COLLECTIVE_GROUP_TENSOR && group != LOOM_COLLECTIVE_GROUP_SEQUENCE &&
      group != LOOM_COLLECTIVE_GROUP_EXPERT && group != LOOM_COLLECTIVE_GROUP_SPARSE &&
      group != LOOM_COLLECTIVE_GROUP_CONTEXT)
    return fail(LOOM_STATUS_CODE_INVALID_ARGUMENT, "tensor_parallel_collective: unknown group " + std::to_string(group));
  try {
    const at::Tensor& x = tensor(args->input);
    at::Tensor& out = tensor(args->output);
    if (!x.defined()) return fail(LOOM_STATUS_CODE_INVALID_ARGUMENT, "tensor_parallel_collective: no input tensor");
    GroupCollectives* calls = g_groups[static_cast<size_t>(group)].load();
    switch (args->op) {
      case LOOM_COLLECTIVE_ALL_REDUCE_SUM:
      case LOOM_COLLECTIVE_ALL_REDUCE_MAX:
        out = calls ? calls->all_reduce(x, args->op == LOOM_COLLECTIVE_ALL_REDUCE_MAX) : x.clone();
        return nullptr;
      case LOOM_COLLECTIVE_ALL_GATHER:
        out = calls ? calls->all_gather(x) : x.clone();
        return nullptr;
      case LOOM_COLLECTIVE_ALL_TO_ALL:
        out = calls ? calls->all_to_all(x) : x.clone();
        return nullptr;
      case LOOM_COLLECTIVE_RING_SHIFT:  // a ring of one hands its input back
        out = calls ? calls->ring_shift(x) : x.clone();
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
