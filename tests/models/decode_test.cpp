// decode_test.cpp: generation with a key/value cache (ABI 1.4 decode) in `gpt` and `llama`.
// Logits from a prefill followed by one token at a time equal the logits of the whole
// sequence computed at once (to 1e-5), for batches of two rows and grouped-query attention;
// a wrong `past` and a sequence past seq_len are one clear error.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/core/grad_mode.h>

#include "model_harness.hpp"

using namespace loom_test;

namespace {

void check_decode_matches_logits(loom::ModelInstance& model, int64_t vocab, int64_t T) {
  REQUIRE(model.has_decode());
  at::NoGradGuard no_grad;
  model.set_training(false);
  const at::Tensor inputs = tokens(2, T, vocab, 21);            // (2, T)
  const at::Tensor whole = model.logits(inputs);                // (2, T, V)
  const int64_t prefill = 3;
  std::vector<at::Tensor> pieces{model.decode(inputs.narrow(1, 0, prefill), 0)};
  for (int64_t t = prefill; t < T; ++t) pieces.push_back(model.decode(inputs.narrow(1, t, 1), t));
  const at::Tensor cached = at::cat(pieces, 1);                 // (2, T, V)
  CHECK(cached.sizes() == whole.sizes());
  CHECK(at::allclose(cached, whole, /*rtol=*/1e-5, /*atol=*/1e-5));
  // past = 0 drops the cache: a new sequence starts clean.
  CHECK(at::allclose(model.decode(inputs.narrow(1, 0, 2), 0), whole.narrow(1, 0, 2), 1e-5, 1e-5));
}

}  // namespace

TEST_CASE("gpt: cached decoding gives the logits of the whole sequence") {
  auto model = make_model("gpt", toml::table{{"vocab_size", 32}, {"n_layer", 2}, {"n_head", 2}, {"n_embd", 16},
                                             {"seq_len", 12}});
  randomize(*model, 5);
  check_decode_matches_logits(*model, 32, 12);
}

TEST_CASE("llama (grouped-query, q/k norms, biases): cached decoding gives the logits of the whole sequence") {
  auto model = make_model("llama", toml::table{{"vocab_size", 32}, {"n_layer", 2}, {"n_head", 4}, {"n_kv_head", 2},
                                               {"n_embd", 16}, {"head_dim", 6}, {"qk_norm", true}, {"qkv_bias", true},
                                               {"seq_len", 12}});
  randomize(*model, 6);
  check_decode_matches_logits(*model, 32, 12);
}

TEST_CASE("decode refuses a past the cache does not hold and a sequence beyond seq_len") {
  auto model = make_model("llama", toml::table{{"vocab_size", 32}, {"n_layer", 1}, {"n_head", 2}, {"n_embd", 8},
                                               {"seq_len", 6}});
  at::NoGradGuard no_grad;
  const at::Tensor inputs = tokens(1, 4, 32, 1);
  model->decode(inputs, 0);
  CHECK(failure_message([&] { model->decode(inputs.narrow(1, 0, 1), 3); })
            .find("llama: decode was given past = 3 but holds 4 positions; start a sequence with past = 0") != std::string::npos);
  CHECK(failure_message([&] { model->decode(inputs, 4); }).find("past + T at most seq_len = 6") != std::string::npos);
}
