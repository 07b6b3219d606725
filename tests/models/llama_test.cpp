// The `llama` component (plugins/models/transformer): Hugging Face Llama names and layouts, grouped-query
// attention and rotary embeddings against an independent reference, tied and untied output,
// gradients through the host's flat buffers, and clear errors.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <cmath>

#include "train/flat_params.hpp"
#include "model_harness.hpp"

using namespace loom_test;

namespace {

// Four query heads share two key/value heads: grouped-query attention is exercised.
constexpr int64_t V = 32, L = 2, H = 4, K = 2, C = 16, T = 8, D = C / H;
constexpr int64_t F = 64;  // the Llama rule for C = 16: floor(8 * 16 / 3) = 42, up to a multiple of 32
constexpr double kTheta = 10000.0, kEps = 1e-5;

toml::table tiny(const toml::table& changes = {}) {
  const toml::table base{{"vocab_size", V}, {"n_layer", L}, {"n_head", H},
                         {"n_kv_head", K},  {"n_embd", C},  {"seq_len", T}};
  return merged(base, changes);
}

// Rotates channel pairs (i, i + D/2) of x: (B, T, D) by angle t * theta^(-2i/D), written out
// as the 2x2 rotation of each pair.
at::Tensor reference_rope(const at::Tensor& x) {
  const int64_t half = D / 2, t_len = x.size(1);
  at::Tensor angle = at::empty({t_len, half}, at::kDouble);
  for (int64_t t = 0; t < t_len; ++t)
    for (int64_t i = 0; i < half; ++i) angle[t][i] = double(t) * std::pow(kTheta, -2.0 * double(i) / double(D));
  const at::Tensor a = x.narrow(-1, 0, half), b = x.narrow(-1, half, half);
  return at::cat({a * angle.cos() - b * angle.sin(), b * angle.cos() + a * angle.sin()}, -1);
}

// Llama written out in double precision from the parameters, by name: RMSNorm and SiLU by
// their formulas, each query head h reading key/value head h / (H / K) explicitly.
at::Tensor reference_llama_loss(std::map<std::string, at::Tensor> p, const at::Tensor& inputs,
                                const at::Tensor& targets) {
  for (auto& [name, t] : p) t = t.detach().to(at::kDouble);
  const auto rms = [](const at::Tensor& x, const at::Tensor& w) {
    return x / (x.pow(2).mean(-1, true) + kEps).sqrt() * w;
  };
  const auto proj = [](const at::Tensor& x, const at::Tensor& w) { return at::matmul(x, w.t()); };  // w: (out, in)
  const auto silu = [](const at::Tensor& x) { return x / (1.0 + (-x).exp()); };
  const at::Tensor embed = p.at("model.embed_tokens.weight");
  at::Tensor x = embed.index_select(0, inputs.reshape(-1)).view({inputs.size(0), inputs.size(1), C});
  for (int64_t i = 0; i < L; ++i) {
    const std::string pre = "model.layers." + std::to_string(i) + ".";
    const at::Tensor h = rms(x, p.at(pre + "input_layernorm.weight"));
    const at::Tensor wq = p.at(pre + "self_attn.q_proj.weight"), wk = p.at(pre + "self_attn.k_proj.weight"),
                     wv = p.at(pre + "self_attn.v_proj.weight");
    const int64_t kv_heads = wk.size(0) / D;
    std::vector<at::Tensor> heads;
    for (int64_t head = 0; head < H; ++head) {
      const int64_t group = head / (H / kv_heads);
      const at::Tensor q = reference_rope(proj(h, wq.narrow(0, head * D, D)));
      const at::Tensor k = reference_rope(proj(h, wk.narrow(0, group * D, D)));
      heads.push_back(reference_head_attention(q, k, proj(h, wv.narrow(0, group * D, D))));
    }
    x = x + proj(at::cat(heads, -1), p.at(pre + "self_attn.o_proj.weight"));
    const at::Tensor h2 = rms(x, p.at(pre + "post_attention_layernorm.weight"));
    const at::Tensor gated =
        silu(proj(h2, p.at(pre + "mlp.gate_proj.weight"))) * proj(h2, p.at(pre + "mlp.up_proj.weight"));
    x = x + proj(gated, p.at(pre + "mlp.down_proj.weight"));
  }
  x = rms(x, p.at("model.norm.weight"));
  const at::Tensor head = p.count("lm_head.weight") ? p.at("lm_head.weight") : embed;
  return reference_loss_sum(proj(x, head), targets);
}

double reference(loom::ModelInstance& model, const at::Tensor& x, const at::Tensor& y) {
  return reference_llama_loss(params_by_name(model), x, y).item<double>();
}

}  // namespace

TEST_CASE("llama parameters carry Hugging Face Llama names, (out, in) shapes and decay flags") {
  auto model = make_model("llama", tiny());
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {{"model.embed_tokens.weight", {V, C}}};
  for (int64_t i = 0; i < L; ++i) {
    const std::string pre = "model.layers." + std::to_string(i) + ".";
    for (auto&& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"self_attn.q_proj.weight", {H * D, C}},
             {"self_attn.k_proj.weight", {K * D, C}},
             {"self_attn.v_proj.weight", {K * D, C}},
             {"self_attn.o_proj.weight", {C, H * D}},
             {"mlp.gate_proj.weight", {F, C}},
             {"mlp.up_proj.weight", {F, C}},
             {"mlp.down_proj.weight", {C, F}},
             {"input_layernorm.weight", {C}},
             {"post_attention_layernorm.weight", {C}}})
      expected.push_back({pre + name, shape});
  }
  expected.push_back({"model.norm.weight", {C}});
  expected.push_back({"lm_head.weight", {V, C}});

  const std::vector<loom::ModelParam> params = model->params();
  REQUIRE(params.size() == expected.size());
  for (size_t i = 0; i < params.size(); ++i) {
    CAPTURE(params[i].name);
    CHECK(params[i].name == expected[i].first);
    CHECK(params[i].tensor->sizes().vec() == expected[i].second);
    const bool decays = params[i].name.find("_proj.weight") != std::string::npos || params[i].name == "lm_head.weight";
    CHECK((params[i].flags & LOOM_PARAM_FLAG_NO_DECAY) == (decays ? 0u : LOOM_PARAM_FLAG_NO_DECAY));
  }

  auto tied = make_model("llama", tiny(toml::table{{"tie_embeddings", true}}));
  CHECK(params_by_name(*tied).count("lm_head.weight") == 0);
  CHECK(params_by_name(*tied).size() == expected.size() - 1);
  auto wide = make_model("llama", tiny(toml::table{{"ffn_hidden", 40}, {"n_kv_head", 0}}));
  CHECK(params_by_name(*wide).at("model.layers.1.mlp.down_proj.weight").sizes().vec() == std::vector<int64_t>{C, 40});
  CHECK(params_by_name(*wide).at("model.layers.1.self_attn.k_proj.weight").sizes().vec() ==
        std::vector<int64_t>{C, C});  // n_kv_head 0: one key/value head per query head
}

TEST_CASE("llama loss sum matches an independent reference with grouped-query attention") {
  auto model = make_model("llama", tiny());
  randomize(*model, 1);
  const at::Tensor x = tokens(2, T, V, 2), y = targets_with_ignored(2, T, V, 3);
  CHECK(model_loss(*model, x, y) == doctest::Approx(reference(*model, x, y)).epsilon(1e-6));
  const at::Tensor xs = x.narrow(1, 0, 3), ys = y.narrow(1, 0, 3);
  CHECK(model_loss(*model, xs, ys) == doctest::Approx(reference(*model, xs, ys)).epsilon(1e-6));
}

TEST_CASE("llama with tied embeddings uses embed_tokens as the output layer") {
  auto model = make_model("llama", tiny(toml::table{{"tie_embeddings", true}, {"n_kv_head", 1}}));
  randomize(*model, 4);
  const at::Tensor x = tokens(3, T, V, 5), y = tokens(3, T, V, 6);
  CHECK(model_loss(*model, x, y) == doctest::Approx(reference(*model, x, y)).epsilon(1e-6));
}

TEST_CASE("gradients reach every llama parameter through the host's flat buffers, tied or not") {
  for (const bool tie : {false, true}) {
    CAPTURE(tie);
    auto model = make_model("llama", tiny(toml::table{{"tie_embeddings", tie}}));
    randomize(*model, 7);
    const std::vector<loom::ModelParam> params = model->params();
    loom::FlatParams flat(params);
    const at::Tensor x = tokens(2, T, V, 8), y = tokens(2, T, V, 9);
    const at::Tensor loss = model->loss_sum(x, y);
    // After the rebinding the model still computes with its (moved) parameters.
    CHECK(loss.item<double>() == doctest::Approx(reference(*model, x, y)).epsilon(1e-6));
    loss.backward();
    for (const loom::ModelParam& p : params) {
      CAPTURE(p.name);
      REQUIRE(p.tensor->grad().defined());
      CHECK(p.tensor->grad().abs().sum().item<double>() > 0.0);
    }
  }
}

TEST_CASE("llama checks its options and its inputs with messages that name the fix") {
  CHECK(failure_message([] { make_model("llama", tiny(toml::table{{"n_kv_head", 3}})); })
            .find("n_kv_head (3) must divide n_head (4)") != std::string::npos);
  CHECK(failure_message([] { make_model("llama", tiny(toml::table{{"n_embd", 12}})); })
            .find("the head dim 3 must be even for rotary embeddings; change head_dim, n_embd or n_head") != std::string::npos);
  CHECK(failure_message([] { make_model("llama", tiny(toml::table{{"rope_theta", 0.0}})); }).find("rope_theta") !=
        std::string::npos);
  auto model = make_model("llama", tiny());
  CHECK(failure_message([&] { model_loss(*model, tokens(1, 12, V, 0), tokens(1, 12, V, 1)); })
            .find("sequence length 12 exceeds the model's seq_len 8") != std::string::npos);
}

TEST_CASE("llama flops_per_token is 6 N + 12 L C T; an untied input embedding is a lookup, not in N") {
  for (const bool tie : {false, true}) {
    CAPTURE(tie);
    auto model = make_model("llama", tiny(toml::table{{"tie_embeddings", tie}}));
    int64_t n = 0;
    for (const auto& [name, t] : params_by_name(*model))
      if (tie || name != "model.embed_tokens.weight") n += t.numel();
    CHECK(model->flops_per_token() == doctest::Approx(6.0 * double(n) + 12.0 * L * C * T));
  }
}

TEST_CASE("llama dropout acts in training mode only and init depends on the seed only") {
  auto model = make_model("llama", tiny(toml::table{{"dropout", 0.5}}), 3);
  randomize(*model, 10);
  const at::Tensor x = tokens(2, T, V, 11), y = tokens(2, T, V, 12);
  model->set_training(false);
  CHECK(model_loss(*model, x, y) == doctest::Approx(reference(*model, x, y)).epsilon(1e-6));
  model->set_training(true);
  CHECK(std::abs(model_loss(*model, x, y) - reference(*model, x, y)) > 1e-3);

  auto a = make_model("llama", tiny(), 3), b = make_model("llama", tiny(), 3);
  for (const auto& [name, t] : params_by_name(*a)) CHECK_MESSAGE(at::equal(t, params_by_name(*b).at(name)), name);
}
