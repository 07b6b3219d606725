// example_model: a model in C++ (torch-linked).
//
// A bigram language model: the logits for the next token are the row of a learned
// (vocab_size x vocab_size) table picked by the current token. Models and optimizers link
// LibTorch, so this plugin records the LibTorch build it was compiled against (its
// fingerprint), and the host loads it only if that equals its own.
#include <loom/model.hpp>

#include <string>

namespace {

class ExampleModel final : public loom::Model {
 public:
  static constexpr const char* name = "example_model";
  static constexpr const char* summary = "Bigram model: next-token logits from a learned table.";
  static constexpr loom_option_spec options[] = {
      loom::option("vocab_size", LOOM_OPTION_TYPE_INT, "256", "Vocabulary size; match the dataset's."),
  };

  ExampleModel(const loom::Config& config, const loom::Context& context)
      : vocab_(config.i64("vocab_size")) {
    if (vocab_ < 2) throw loom::Error("example_model: vocab_size must be >= 2, got " + std::to_string(vocab_));
    // Parameters are registered once, in a fixed order; the host moves their storage into its
    // flat buffer later, and the handle kept here follows. Zeros: every token equally likely.
    table_ = add_param("table.weight", at::zeros({vocab_, vocab_}, at::Device(context.device)),
                       LOOM_PARAM_FLAG_NO_DECAY);
  }

  // The SUM of the per-token losses of one micro-batch; the host divides by the token count.
  // inputs, targets: int64 (B, T) on the run device.
  at::Tensor loss_sum(const at::Tensor& inputs, const at::Tensor& targets) override {
    return loom::token_loss_sum(at::embedding(table_, inputs), targets);  // logits (B, T, V)
  }

 private:
  int64_t vocab_;
  at::Tensor table_;
};

}  // namespace

// In a TORCH plugin, LOOM_PLUGIN also records the LibTorch fingerprint.
LOOM_PLUGIN("example_model", "0.1.0", loom::component<ExampleModel>())
