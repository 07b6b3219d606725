// param_created.hpp: the host's side of loom_host_api.param_created (ABI 1.18). A model calls
// it for each parameter as its create makes it; while a run builds the model as this rank's
// slice ([distributed] shard = "parameters", train/sliced_start.hpp) an adopter installed for
// that build takes the value over, otherwise the call does nothing.
#pragma once

#include <ATen/ATen.h>
#include <loom/abi.h>

#include <string>

namespace loom {

class ParamAdopter {
 public:
  virtual ~ParamAdopter() = default;
  // param: the tensor the model keeps, with its initial value; the adopter may rebind its
  // storage (set_data), which every handle to it sees.
  virtual void created(const std::string& name, at::Tensor& param) = 0;
};

// Installs adopter for one model build (the scope's life); one build at a time per process.
class ParamAdopterScope {
 public:
  explicit ParamAdopterScope(ParamAdopter& adopter);
  ~ParamAdopterScope();
  ParamAdopterScope(const ParamAdopterScope&) = delete;
  ParamAdopterScope& operator=(const ParamAdopterScope&) = delete;
};

// The loom_host_api.param_created entry.
loom_status* param_created(loom_param_created_args* args);

}  // namespace loom
