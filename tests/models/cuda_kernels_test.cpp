// The option cuda_kernels of gpt, llama and hf_causal_lm (layers/cuda_kernels.hpp). What it
// changes on a GPU is tests/gpu's and ops_gpu_tests' to check; here: a CPU run is the same bit
// for bit with it on (only CUDA tensors reach the kernels), and a value it does not know, or
// "loom" in a build without the kernels, is refused by name.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include "model_harness.hpp"

using namespace loom_test;

namespace {

struct LossAndGrads {
  double loss;
  std::map<std::string, at::Tensor> grads;
};

LossAndGrads loss_and_grads(const std::string& component, const toml::table& options) {
  auto model = make_model(component, options);
  randomize(*model, 5);
  model->set_training(true);
  const at::Tensor loss = model->loss_sum(tokens(2, 8, 32, 6), tokens(2, 8, 32, 7));
  loss.backward();
  LossAndGrads out{loss.item<double>(), {}};
  for (const auto& [name, p] : params_by_name(*model)) out.grads[name] = p.grad().clone();
  return out;
}

const toml::table kGpt{{"vocab_size", 32}, {"n_layer", 2}, {"n_head", 2}, {"n_embd", 16}, {"seq_len", 8}};
const toml::table kQwen3Like{{"vocab_size", 32}, {"n_layer", 2}, {"n_head", 2}, {"n_kv_head", 1},
                             {"n_embd", 16},     {"seq_len", 8}, {"qk_norm", true}};

}  // namespace

#if LOOM_TEST_CUDA_KERNELS
TEST_CASE("cuda_kernels = \"loom\" leaves a CPU run as it is, bit for bit") {
  for (const auto& [component, options] : {std::pair{std::string("gpt"), kGpt}, {std::string("llama"), kQwen3Like}}) {
    CAPTURE(component);
    const LossAndGrads aten = loss_and_grads(component, merged(options, toml::table{{"cuda_kernels", "aten"}}));
    const LossAndGrads loom = loss_and_grads(component, merged(options, toml::table{{"cuda_kernels", "loom"}}));
    CHECK(loom.loss == aten.loss);
    REQUIRE(loom.grads.size() == aten.grads.size());
    for (const auto& [name, g] : aten.grads) {
      CAPTURE(name);
      CHECK(at::equal(g, loom.grads.at(name)));
    }
  }
  make_model("gpt", kGpt);  // the default puts the plugin's switch back off
}
#else
TEST_CASE("cuda_kernels = \"loom\" is refused where the plugin was built without the kernels") {
  const std::string message =
      failure_message([&] { make_model("gpt", merged(kGpt, toml::table{{"cuda_kernels", "loom"}})); });
  CHECK(message.find("gpt: cuda_kernels = \"loom\", but this build of the plugin has no CUDA kernels") !=
        std::string::npos);
}
#endif

TEST_CASE("cuda_kernels refuses a value it does not know, naming the model and the option") {
  const std::string message =
      failure_message([&] { make_model("llama", merged(kQwen3Like, toml::table{{"cuda_kernels", "fused"}})); });
  CHECK(message.find("llama: cuda_kernels must be \"aten\" or \"loom\", got \"fused\"") != std::string::npos);
}
