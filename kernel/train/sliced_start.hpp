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
//
// Pipeline stages ([distributed] pipeline_parallel = P > 1) start the same way: a first build
// learns which parameters belong to the layers other stages run (loom_param_view.unit), and the
// second drops those as the model makes them, so a stage's memory at the start is its own layers,
// what lies outside layers and the largest single parameter (train/stage_placement.hpp); with
// frozen weights the stages then compute their checksum together (use_chained_frozen_checksum).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "abi/compute_components.hpp"
#include "train/flat_params.hpp"
#include "train/run_plan.hpp"

namespace loom {

// The layout from a first build when the run can start sliced: shard = "parameters" over more
// than one rank, on the CPU or on CUDA with mapped buffers (the first build then runs on the
// CPU, and the second creates each parameter on the GPU, keeps its slice in the mapped owned
// slice and drops the rest: a rank's GPU memory at the start is its slice plus the largest
// parameter), no pipeline stages, nothing frozen ([lora] and [model] freeze decide which
// weights train only once the model is built), and a model built against ABI 1.18 or later.
// Null otherwise (with an info line saying why, where the run would shard).
std::unique_ptr<FlatParams> sliced_start_layout(const RunPlan& plan, const RunContext& model_run, const ShardSpec& spec);

// Under pipeline parallelism, the parameters (trainable or frozen) of the layers other stages
// run, given back before the flat buffers exist; nullopt when every stage holds the whole model
// (the function has logged why).
using OtherStagesLayers = std::function<std::optional<std::set<std::string>>(ModelInstance&)>;

// What a pipeline stage learned from a first build: known when that build ran, and then the
// other stages' layers (nullopt: every stage holds the whole model).
struct StageStart {
  bool known = false;
  std::optional<std::set<std::string>> others;
  const std::set<std::string>* dropped() const { return known && others ? &*others : nullptr; }
};

// The first build of a pipeline stage: on the CPU, for a model built against ABI 1.18 ([lora]
// and [model] freeze too: the stages then compute the frozen weights' checksum together), with
// an info line saying why where that fails (and known left false, so that the stage builds the
// model whole and gives the rest back after).
StageStart stage_start_layers(const RunPlan& plan, const RunContext& model_run, const OtherStagesLayers& other_stages);

// The info line of a stage so built: how many of the model's parameters it dropped, and the
// process's peak resident memory so far.
void report_stage_start(size_t dropped, size_t params);

// Builds the model; with a layout, each parameter is adopted into it as it is created; with
// dropped, the values of those parameters are dropped as they are created (another stage's).
ModelInstance build_model(const SlotConfig& slot, const RunContext& model_run, FlatParams* layout,
                          const std::set<std::string>* dropped = nullptr);

// The flat buffers over the model's trainable dense parameters: the layout's, taking over any
// parameter the build did not hand it, or new buffers without one.
FlatParams flat_params_for(std::unique_ptr<FlatParams>& layout, const std::vector<ModelParam>& params,
                           const ShardSpec& spec);

}  // namespace loom
