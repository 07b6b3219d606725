// unit_boundary.hpp: the host's side of a model's units (loom/model.h, ABI 1.5). A model calls
// the host API's unit_boundary before and after the forward of each unit (a layer) it
// declared; while a run shards its parameters, the trainer installs a handler that gathers and
// releases the unit's weights there (train/parameter_shards.hpp). Otherwise the tensor passes
// through unchanged.
#pragma once

#include <ATen/ATen.h>
#include <loom/abi.h>

namespace loom {

class UnitBoundaries {
 public:
  virtual ~UnitBoundaries() = default;
  // x: the unit's input; returns what the unit computes on.
  virtual at::Tensor enter(int64_t unit, const at::Tensor& x) = 0;
  // y: the unit's output; returns what the model goes on with.
  virtual at::Tensor exit(int64_t unit, const at::Tensor& y) = 0;
};

// One run per process: the handler of the run now training, or null.
void set_unit_boundaries(UnitBoundaries* handler);

// The loom_host_api.unit_boundary entry.
loom_status* unit_boundary(loom_unit_boundary_args* args);

}  // namespace loom
