#include "train/sliced_start.hpp"

#include <ATen/core/grad_mode.h>
#include <spdlog/spdlog.h>

#include "abi/host_api.hpp"
#include "abi/param_created.hpp"
#include "abi/registry.hpp"
#include "train/cpu_memory.hpp"
#include "train/sparse_table_updates.hpp"

namespace loom {
namespace {

constexpr uint32_t kParamCreatedMinor = 18;
constexpr int64_t kLargeValue = 1 << 20;  // bytes

// A large value a build just dropped: the heap's free pages go back to the OS, since the small
// allocations made in between would otherwise split the freed blocks, so that the next value
// takes fresh pages (keep_freed_cpu_memory keeps them otherwise).
void dropped(int64_t bytes) {
  if (bytes >= kLargeValue) return_free_heap_pages();
}

// The first build: each value is dropped as it is created, leaving a tensor of its shape that
// holds no pages (the model may still write into it; nobody reads it).
class DropValues final : public ParamAdopter {
 public:
  void created(const std::string&, at::Tensor& param) override {
    at::NoGradGuard no_grad;
    const auto bytes = static_cast<int64_t>(param.nbytes());
    param.set_data(untouched_cpu_tensor(param.sizes(), param.scalar_type()));
    dropped(bytes);
  }
  bool write(const std::string&, at::Tensor&, const at::Tensor&) override { return true; }  // none kept
};

// The second build: each value goes into its place, only this rank's slice of it kept.
class IntoLayout final : public ParamAdopter {
 public:
  explicit IntoLayout(FlatParams& layout) : layout_(layout) {}
  void created(const std::string& name, at::Tensor& param) override {
    const auto bytes = static_cast<int64_t>(param.nbytes());
    if (layout_.adopt(name, param)) dropped(bytes);
  }
  bool write(const std::string& name, at::Tensor& param, const at::Tensor& value) override {
    return layout_.write_owned(name, param, value);
  }

 private:
  FlatParams& layout_;
};

// Drops the values of the named parameters (the layers other pipeline stages run).
class DropNamed final : public ParamAdopter {
 public:
  explicit DropNamed(const std::set<std::string>& names) : names_(names) {}
  void created(const std::string& name, at::Tensor& param) override {
    if (names_.count(name)) drop_.created(name, param);
  }
  bool write(const std::string& name, at::Tensor&, const at::Tensor&) override { return names_.count(name) > 0; }

 private:
  const std::set<std::string>& names_;
  DropValues drop_;
};

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

std::string peak_so_far() {
  const int64_t peak = peak_resident_bytes();
  return peak > 0 ? fmt::format("; peak resident memory so far {:.0f} MiB", mib(peak)) : "";
}

// Why a first build that keeps no values cannot learn what to keep, so that the model is built
// whole before a part of it is kept: "" when it can. by_layer: the part kept is a pipeline
// stage's layers, which do not depend on what is frozen; a slice of the flat buffers does
// ([lora] and [model] freeze take the frozen weights out of them once the model is built).
std::string why_built_whole(const RunPlan& plan, bool by_layer) {
  if (plan.lora.enabled && !by_layer) return "[lora] freezes the base weights once it is built";
  if (!plan.model_init.freeze.empty() && !by_layer) return "[model] freeze picks weights once it is built";
  const PluginRecord* plugin = plan.model.component ? plan.model.component->plugin : nullptr;
  if (plugin && plugin->abi_minor < kParamCreatedMinor)
    return fmt::format("model {}'s plugin was built against Loom ABI 1.{}, before models told the host of each "
                       "parameter (1.{})",
                       plan.model.component->name, plugin->abi_minor, kParamCreatedMinor);
  return "";
}

}  // namespace

std::unique_ptr<FlatParams> sliced_start_layout(const RunPlan& plan, const RunContext& model_run, const ShardSpec& spec) {
  const bool on_cpu = model_run.device == "cpu";
  if (spec.mode != ShardMode::parameters || spec.world_size <= 1 || (!on_cpu && !spec.mapped_buffers) ||
      model_run.pipeline_parallel_size > 1)
    return nullptr;  // not sharded here, or refused later by name
  if (const std::string why = why_built_whole(plan, false); !why.empty()) {
    spdlog::info("[distributed] shard = \"parameters\": every rank builds the model whole before keeping its slice: {}",
                 why);
    return nullptr;
  }
  // On a GPU the first build runs on the CPU, where a dropped value leaves a tensor without
  // pages (a device has none such); the layout is then the GPU's, with only the owned slices
  // mapped (train/mapped_cuda_memory.hpp).
  RunContext first_run = model_run;
  first_run.device = "cpu";
  DropValues drop;
  ParamAdopterScope scope(drop);
  const QuietPluginInfo quiet;  // its lines repeat the second build's, or name the CPU
  ModelInstance first(plan.model, first_run);
  FlatParams::LayoutOnly layout;
  if (!on_cpu) layout.device = at::Device(model_run.device);
  return std::make_unique<FlatParams>(dense_params(first.params()), spec, layout);
}

StageStart stage_start_layers(const RunPlan& plan, const RunContext& model_run, const OtherStagesLayers& other_stages) {
  if (model_run.pipeline_parallel_size <= 1 || !other_stages) return {};
  // Dropped values are rebound to CPU mappings that hold no pages; a device has none such.
  const std::string why =
      model_run.device != "cpu" ? "a build that keeps no values runs on the CPU only" : why_built_whole(plan, true);
  if (!why.empty()) {
    spdlog::info("pipeline: every stage builds the model whole before giving the other stages' layers back: {}", why);
    return {};
  }
  DropValues drop;
  ParamAdopterScope scope(drop);
  ModelInstance first(plan.model, model_run);
  return {true, other_stages(first)};
}

void report_stage_start(size_t dropped, size_t params) {
  spdlog::info("pipeline: this stage was built with its own layers only ({} of the model's {} parameters are other "
               "stages' and were dropped as they were made; a first build that kept no values told them apart){}",
               dropped, params, peak_so_far());
}

ModelInstance build_model(const SlotConfig& slot, const RunContext& model_run, FlatParams* layout,
                          const std::set<std::string>* dropped) {
  if (layout) {
    IntoLayout into(*layout);
    ParamAdopterScope scope(into);
    return ModelInstance(slot, model_run);
  }
  if (dropped) {
    DropNamed drop(*dropped);
    ParamAdopterScope scope(drop);
    return ModelInstance(slot, model_run);
  }
  return ModelInstance(slot, model_run);
}

FlatParams flat_params_for(std::unique_ptr<FlatParams>& layout, const std::vector<ModelParam>& params,
                           const ShardSpec& spec) {
  if (!layout) return FlatParams(params, spec);
  const size_t adopted = layout->take_over(params);
  spdlog::info("[distributed] shard = \"parameters\": the model was built as this rank's slice ({} of {} parameters "
               "kept in part as they were made; the layout came from a first build that kept no values){}",
               adopted, params.size(), peak_so_far());
  FlatParams out = std::move(*layout);
  layout.reset();
  return out;
}

}  // namespace loom
