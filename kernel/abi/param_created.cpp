#include "abi/param_created.hpp"

#include <loom/torch.hpp>

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

}  // namespace loom
