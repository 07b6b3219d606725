// frozen_params.hpp: which of the model's parameters do not train ([model] freeze; with [lora],
// everything but the adapters), and the checksum a checkpoint keeps in their place. A frozen
// parameter stays the model's own tensor: it never enters the flat buffers, so it has no
// gradient, no optimizer state and no all-reduce traffic.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "abi/compute_components.hpp"
#include "formats/weight_loading.hpp"
#include "train/run_plan.hpp"

namespace loom {

// The matching rule of [model] freeze: a pattern with '*' matches whole names ('*' stands for
// any run of characters, dots included); one without matches every name that contains it.
bool freeze_pattern_matches(const std::string& pattern, const std::string& name);

// Whether the plan freezes this parameter ([lora]: all but the adapters; [model] freeze's
// patterns), as freeze_parameters will: answerable before it ran (a pipeline stage's first build).
bool frozen_by_plan(const RunPlan& plan, const ModelParam& param);

struct FrozenSummary {
  int64_t trained = 0, frozen = 0;  // parameter elements
  size_t adapter_tensors = 0;       // LoRA's A and B matrices ([lora])
  struct Match {
    std::string pattern;
    size_t tensors = 0;
    std::string first_names;        // "a, b, c, d, ..."
  };
  std::vector<Match> matches;       // one per freeze pattern
  // "123,456 parameters train, 7,890 frozen (freeze \"embed\": 1 tensor; LoRA: 8 adapter tensors)"
  std::string describe() const;
};

// Marks the frozen parameters on the model (with their checksum, frozen_checksum below), turns
// their gradients off and, with frozen_dtype = "bf16", stores them in bf16. Throws a usage Failure (exit 2) for a pattern that matches
// nothing, a [lora] target that matches no adapted layer, bf16 without bf16 autocast, or a
// model left with nothing to train. Does nothing without freeze patterns or [lora].
// dropped: parameters whose values the build dropped (other pipeline stages' layers,
// train/sliced_start.hpp): they stay without pages (bf16 ones too), and the checksum is left
// for the stages to compute together (chained_frozen_checksum, train/stage_placement.hpp).
FrozenSummary freeze_parameters(ModelInstance& model, const RunPlan& plan,
                                const std::set<std::string>* dropped = nullptr);

// The checksum below, one tensor at a time: a stage can hand the state on to the next.
class FrozenHasher {
 public:
  explicit FrozenHasher(uint64_t state = 0xcbf29ce484222325ull) : state_(state) {}  // FNV-1a's offset basis
  void add(const std::string& name, const at::Tensor& value);  // its dtype, shape and values
  uint64_t state() const { return state_; }
  std::string text() const;  // 16 hex digits

 private:
  void mix_bytes(const unsigned char* data, size_t size);
  uint64_t state_;
};

// 64-bit FNV-1a over 8-byte words of the name, dtype, shape and values of every parameter in
// `frozen`, in registration order, as 16 hex digits: what a checkpoint records instead of them.
std::string frozen_checksum(const std::vector<ModelParam>& params, const std::set<std::string>& frozen);

// [model] init_from, then freeze_parameters: the model as the run's first step sees it.
// held_elsewhere and write: init_model_weights'; dropped: freeze_parameters'.
FrozenSummary prepare_model(ModelInstance& model, const RunPlan& plan,
                            const std::set<std::string>* held_elsewhere = nullptr,
                            const formats::WriteValue& write = {}, const std::set<std::string>* dropped = nullptr);

}  // namespace loom
