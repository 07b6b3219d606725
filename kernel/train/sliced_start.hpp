// sliced_start.hpp: [distributed] shard = "parameters" starts without any rank holding the
// whole model. A first build of the model learns the flat buffers' layout (every parameter's
// name, shape and place) and keeps none of the values: each is dropped as the model creates it
// (loom_host_api.param_created, ABI 1.18). The second build copies, as each parameter is
// created, only the part inside this rank's slice into the flat buffer and rebinds the
// parameter there; the rest of the buffer never gets pages. So a rank's memory at the start is
// its slice plus the largest single parameter, not the whole model (and the flat copy of it).
//
// Every rank draws the same initial values (models seed their own generators from run.seed),
// so the slices are one process's model cut; the gathers then broadcast each slice from its
// owner, and the start broadcast of the buffers is skipped (train/factories.cpp).
#pragma once

#include <memory>
#include <vector>

#include "abi/compute_components.hpp"
#include "train/flat_params.hpp"
#include "train/run_plan.hpp"

namespace loom {

// The layout from a first build when the run can start sliced: shard = "parameters" over more
// than one rank, on the CPU, no pipeline stages, nothing frozen ([lora] and [model] freeze
// decide which weights train only once the model is built), and a model built against ABI 1.18
// or later. Null otherwise (with an info line saying why, where the run would shard).
std::unique_ptr<FlatParams> sliced_start_layout(const RunPlan& plan, const RunContext& model_run, const ShardSpec& spec);

// Builds the model; with a layout, each parameter is adopted into it as it is created.
ModelInstance build_model(const SlotConfig& slot, const RunContext& model_run, FlatParams* layout);

// The flat buffers over the model's trainable dense parameters: the layout's, taking over any
// parameter the build did not hand it, or new buffers without one.
FlatParams flat_params_for(std::unique_ptr<FlatParams>& layout, const std::vector<ModelParam>& params,
                           const ShardSpec& spec);

}  // namespace loom
