// recompute.hpp: activation checkpointing for the blocks of `gpt`, `llama` and `hf_causal_lm`
// (option activation_checkpointing). A checkpointed block keeps only its input during forward;
// backward runs the block again, with the random-number and autocast state of the first run so
// dropout and bf16 casts repeat exactly, and backpropagates through that second run. The
// gradients are those of the run without checkpointing; the price is one more forward of each
// checkpointed block.
#pragma once

#include <ATen/ATen.h>
#include <loom/plugin.hpp>

#include <functional>
#include <string>
#include <vector>

namespace loom_gpt {

struct RecomputePolicy {
  std::string mode = "none";  // "none", "full" (every block) or "every_n"
  int64_t every = 2;          // every_n: blocks 0, n, 2n, ... are checkpointed
  bool applies(size_t block) const {
    return mode == "full" || (mode == "every_n" && static_cast<int64_t>(block) % every == 0);
  }
};

// The two options every model of this plugin declares, and reading them.
inline constexpr loom_option_spec kActivationCheckpointingOption =
    loom::option("activation_checkpointing", LOOM_OPTION_TYPE_STRING, "none",
                 "\"full\": recompute every block's activations in backward instead of keeping them (less memory, one "
                 "more forward per block); \"every_n\": only every checkpoint_every-th block; \"none\".");
inline constexpr loom_option_spec kCheckpointEveryOption =
    loom::option("checkpoint_every", LOOM_OPTION_TYPE_INT, "2",
                 "With activation_checkpointing = \"every_n\": blocks 0, n, 2n, ... are recomputed.");
inline RecomputePolicy recompute_policy_from(const loom::Config& c) {
  return {c.str("activation_checkpointing"), c.i64("checkpoint_every")};
}

// Throws loom::Error naming the component and the option when mode or every is not valid.
void check_recompute_policy(const RecomputePolicy& policy, const std::string& component);

// block(x), keeping none of block's activations when gradients are being recorded. block must
// be a pure function of x and the model's parameters (it may draw random numbers), and stay
// callable until backward: capture by value what a caller's locals would otherwise hold.
at::Tensor recomputed(std::function<at::Tensor(const at::Tensor&)> block, const at::Tensor& x);

// The same for a block of several outputs (a mixture of experts' layer: its output, the router
// logits the auxiliary loss reads, the chosen experts). Floating-point outputs carry gradients
// (backward runs the block again and backpropagates from every output that got one); integer
// ones do not.
using Outputs = std::vector<at::Tensor>;
Outputs recomputed(std::function<Outputs(const at::Tensor&)> block, const at::Tensor& x);

}  // namespace loom_gpt
