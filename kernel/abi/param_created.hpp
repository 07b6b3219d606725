// param_created.hpp: the host's side of loom_host_api.param_created (ABI 1.18) and param_write
// (1.19). A model calls the first for each parameter as its create makes it, the second for a
// value it loads into one later in the same create; while a run builds the model as a part
// (this rank's slice with [distributed] shard = "parameters", a pipeline stage's own layers:
// train/sliced_start.hpp) an adopter installed for that build takes the value over and writes
// only the part it keeps; otherwise created does nothing and write copies the whole value.
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
  // value (param's shape) loaded into the parameter created as name: true when the adopter
  // wrote what it keeps of it (nothing, for a value it dropped), false to have it copied whole.
  virtual bool write(const std::string& name, at::Tensor& param, const at::Tensor& value) = 0;
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
// The loom_host_api.param_write entry: a value of another shape is refused (invalid argument).
loom_status* param_write(loom_param_write_args* args);

}  // namespace loom
