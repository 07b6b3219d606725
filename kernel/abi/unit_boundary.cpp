#include "abi/unit_boundary.hpp"

#include <loom/torch.hpp>

#include <atomic>

#include "abi/host_api.hpp"

namespace loom {
namespace {

std::atomic<UnitBoundaries*> g_handler{nullptr};

}  // namespace

void set_unit_boundaries(UnitBoundaries* handler) { g_handler.store(handler); }

loom_status* unit_boundary(loom_unit_boundary_args* args) {
  const auto fail = [](loom_status_code code, const std::string& message) {
    return host_api()->status_create(code, message.c_str());
  };
  if (args == nullptr || args->input == nullptr || args->output == nullptr)
    return fail(LOOM_STATUS_CODE_INVALID_ARGUMENT, "unit_boundary: args, input and output must be set");
  try {
    const at::Tensor& x = tensor(args->input);
    at::Tensor& out = tensor(args->output);
    UnitBoundaries* handler = g_handler.load();
    if (handler == nullptr) out = x;
    else if (args->phase == LOOM_UNIT_ENTER) out = handler->enter(args->unit, x);
    else if (args->phase == LOOM_UNIT_EXIT) out = handler->exit(args->unit, x);
    else return fail(LOOM_STATUS_CODE_INVALID_ARGUMENT, "unit_boundary: unknown phase " + std::to_string(args->phase));
    return nullptr;
  } catch (const Failure& f) {
    return fail(LOOM_STATUS_CODE_INTERNAL, f.what());
  } catch (const std::exception& e) {
    return fail(LOOM_STATUS_CODE_INTERNAL, e.what());
  }
}

}  // namespace loom
