// [model] freeze's matching rule (train/frozen_params.hpp): substrings without '*', whole-name
// globs with it.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include "train/frozen_params.hpp"

using loom::freeze_pattern_matches;

TEST_CASE("a pattern without * matches names that contain it") {
  CHECK(freeze_pattern_matches("embed", "model.embed_tokens.weight"));
  CHECK(freeze_pattern_matches("layers.0.", "model.layers.0.mlp.up_proj.weight"));
  CHECK_FALSE(freeze_pattern_matches("layers.0.", "model.layers.10.mlp.up_proj.weight"));
  CHECK_FALSE(freeze_pattern_matches("lm_head", "model.norm.weight"));
}

TEST_CASE("a pattern with * matches whole names, * spanning dots") {
  CHECK(freeze_pattern_matches("*", "anything.at.all"));
  CHECK(freeze_pattern_matches("model.layers.*.self_attn.*", "model.layers.3.self_attn.q_proj.weight"));
  CHECK_FALSE(freeze_pattern_matches("model.layers.*.self_attn.*", "model.layers.3.mlp.up_proj.weight"));
  CHECK(freeze_pattern_matches("*.bias", "transformer.h.0.ln_1.bias"));
  CHECK_FALSE(freeze_pattern_matches("*.bias", "transformer.h.0.ln_1.bias.extra"));
  CHECK(freeze_pattern_matches("transformer.h.1*", "transformer.h.11.mlp.c_fc.weight"));  // globs are literal
  CHECK(freeze_pattern_matches("a**b", "ab"));
  CHECK_FALSE(freeze_pattern_matches("a*b", "a"));
}
