#include "abi/param_created.hpp"

#include <loom/torch.hpp>

#include <ATen/core/grad_mode.h>

#include <atomic>

#include "abi/host_api.hpp"
#include "base/failure.hpp"

namespace loom {
namespace {

std::atomic<ParamAdopter*> g_adopter{nullptr};

}  // namespace

ParamAdopterScope::ParamAdopterScope(ParamAdopter& adopter) {
  ParamAdopter* none = nullptr;
  if (!g_adopter.compare_exchange_strong(none, &adopter))
    throw runtime_failure("building a model: another model build in this process is taking its parameters over");
}

ParamAdopterScope::~ParamAdopterScope() { g_adopter.store(nullptr); }

loom_status* param_created(loom_param_created_args* args) {
  if (args == nullptr || args->name == nullptr || args->tensor == nullptr)
    return host_api()->status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT,
                                     "param_created: args, name and tensor must be set");
  return status_from(LOOM_STATUS_CODE_INTERNAL, "param_created", [&]() -> loom_status* {
    if (ParamAdopter* adopter = g_adopter.load()) adopter->created(args->name, tensor(args->tensor));
    return nullptr;
  });
}

loom_status* param_write(loom_param_write_args* args) {
  if (args == nullptr || args->name == nullptr || args->tensor == nullptr || args->value == nullptr)
    return host_api()->status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT,
                                     "param_write: args, name, tensor and value must be set");
  return status_from(LOOM_STATUS_CODE_INTERNAL, "param_write", [&]() -> loom_status* {
    at::Tensor& param = tensor(args->tensor);
    const at::Tensor& value = tensor(args->value);
    if (param.sizes() != value.sizes())
      return host_api()->status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT,
                                       ("param_write: " + std::string(args->name) + ": a value of shape " +
                                        c10::str(value.sizes()) + " for a parameter of shape " +
                                        c10::str(param.sizes()))
                                           .c_str());
    ParamAdopter* adopter = g_adopter.load();
    if (adopter && adopter->write(args->name, param, value)) return nullptr;
    at::NoGradGuard no_grad;  // a leaf that requires grad takes the value in place
    param.copy_(value);
    return nullptr;
  });
}

}  // namespace loom
