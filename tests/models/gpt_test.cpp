// The `gpt` component (plugins/models/transformer): Hugging Face GPT-2 names and layouts, a forward
// pass that matches an independent reference, gradients through the host's flat buffers, and
// clear errors.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <cmath>

#include "train/flat_params.hpp"
#include "model_harness.hpp"

using namespace loom_test;

namespace {

constexpr int64_t V = 32, L = 2, H = 2, C = 16, T = 8;

toml::table tiny(const toml::table& changes = {}) {
  const toml::table base{{"vocab_size", V}, {"n_layer", L},  {"n_head", H},
                         {"n_embd", C},     {"seq_len", T}, {"dropout", 0.0}};
  return merged(base, changes);
}

// The message with which creating a gpt with these changes fails ("" when it does not).
std::string create_error(const toml::table& changes) {
  return failure_message([&] { make_model("gpt", tiny(changes)); });
}

// GPT-2 written out independently in double precision from the parameters, by name: LayerNorm
// by its formula, each head from its own column block of c_attn (Conv1D layout: x W + b with W
// stored (in, out)), attention one position at a time, GELU by its tanh formula.
at::Tensor reference_gpt_loss(std::map<std::string, at::Tensor> p, const at::Tensor& inputs,
                              const at::Tensor& targets) {
  for (auto& [name, t] : p) t = t.detach().to(at::kDouble);
  const auto get = [&](const std::string& name) { return p.count(name) ? p.at(name) : at::Tensor(); };
  const auto layer_norm = [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    const at::Tensor mean = x.mean(-1, true), var = (x - mean).pow(2).mean(-1, true);
    const at::Tensor y = (x - mean) / (var + 1e-5).sqrt() * w;
    return b.defined() ? y + b : y;
  };
  const auto affine = [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    const at::Tensor y = at::matmul(x, w);  // (.., in) x (in, out)
    return b.defined() ? y + b : y;
  };
  const auto gelu = [](const at::Tensor& x) {
    return 0.5 * x * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x.pow(3))));
  };
  const int64_t t_len = inputs.size(1), D = C / H;
  at::Tensor x = p.at("transformer.wte.weight").index_select(0, inputs.reshape(-1)).view({inputs.size(0), t_len, C}) +
                 p.at("transformer.wpe.weight").narrow(0, 0, t_len);
  for (int64_t i = 0; i < L; ++i) {
    const std::string pre = "transformer.h." + std::to_string(i) + ".";
    const at::Tensor h = layer_norm(x, p.at(pre + "ln_1.weight"), get(pre + "ln_1.bias"));
    const at::Tensor w = p.at(pre + "attn.c_attn.weight"), b = get(pre + "attn.c_attn.bias");
    std::vector<at::Tensor> heads;
    for (int64_t head = 0; head < H; ++head) {
      const auto cols = [&](int64_t which) {  // which: 0 = q, 1 = k, 2 = v
        const int64_t start = which * C + head * D;
        return affine(h, w.narrow(1, start, D), b.defined() ? b.narrow(0, start, D) : at::Tensor());
      };
      heads.push_back(reference_head_attention(cols(0), cols(1), cols(2)));
    }
    x = x + affine(at::cat(heads, -1), p.at(pre + "attn.c_proj.weight"), get(pre + "attn.c_proj.bias"));
    const at::Tensor h2 = layer_norm(x, p.at(pre + "ln_2.weight"), get(pre + "ln_2.bias"));
    const at::Tensor fc = gelu(affine(h2, p.at(pre + "mlp.c_fc.weight"), get(pre + "mlp.c_fc.bias")));
    x = x + affine(fc, p.at(pre + "mlp.c_proj.weight"), get(pre + "mlp.c_proj.bias"));
  }
  x = layer_norm(x, p.at("transformer.ln_f.weight"), get("transformer.ln_f.bias"));
  return reference_loss_sum(at::matmul(x, p.at("transformer.wte.weight").t()), targets);  // tied output
}

}  // namespace

TEST_CASE("gpt parameters carry Hugging Face GPT-2 names, Conv1D (in, out) shapes and decay flags") {
  auto model = make_model("gpt", tiny());
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {{"transformer.wte.weight", {V, C}},
                                                                        {"transformer.wpe.weight", {T, C}}};
  for (int64_t i = 0; i < L; ++i) {
    const std::string pre = "transformer.h." + std::to_string(i) + ".";
    for (auto&& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"ln_1.weight", {C}},
             {"ln_1.bias", {C}},
             {"attn.c_attn.weight", {C, 3 * C}},
             {"attn.c_attn.bias", {3 * C}},
             {"attn.c_proj.weight", {C, C}},
             {"attn.c_proj.bias", {C}},
             {"ln_2.weight", {C}},
             {"ln_2.bias", {C}},
             {"mlp.c_fc.weight", {C, 4 * C}},
             {"mlp.c_fc.bias", {4 * C}},
             {"mlp.c_proj.weight", {4 * C, C}},
             {"mlp.c_proj.bias", {C}}})
      expected.push_back({pre + name, shape});
  }
  expected.push_back({"transformer.ln_f.weight", {C}});
  expected.push_back({"transformer.ln_f.bias", {C}});

  const std::vector<loom::ModelParam> params = model->params();
  REQUIRE(params.size() == expected.size());  // no lm_head: tied to wte
  for (size_t i = 0; i < params.size(); ++i) {
    CAPTURE(params[i].name);
    CHECK(params[i].name == expected[i].first);
    CHECK(params[i].tensor->sizes().vec() == expected[i].second);
    CHECK((params[i].tensor->scalar_type() == at::kFloat));
    const bool decays = params[i].name.find("attn.c_attn.weight") != std::string::npos ||
                        params[i].name.find("c_proj.weight") != std::string::npos ||
                        params[i].name.find("mlp.c_fc.weight") != std::string::npos;
    CHECK((params[i].flags & LOOM_PARAM_FLAG_NO_DECAY) == (decays ? 0u : LOOM_PARAM_FLAG_NO_DECAY));
  }
}

TEST_CASE("gpt loss sum matches an independent ATen reference, ignored targets left out") {
  auto model = make_model("gpt", tiny());
  randomize(*model, 1);
  const at::Tensor x = tokens(2, T, V, 2), y = targets_with_ignored(2, T, V, 3);
  const double ref = reference_gpt_loss(params_by_name(*model), x, y).item<double>();
  CHECK(model_loss(*model, x, y) == doctest::Approx(ref).epsilon(1e-6));
  // Shorter inputs use the first position embeddings and the top-left of the causal mask.
  const at::Tensor xs = x.narrow(1, 0, 5), ys = y.narrow(1, 0, 5);
  CHECK(model_loss(*model, xs, ys) ==
        doctest::Approx(reference_gpt_loss(params_by_name(*model), xs, ys).item<double>()).epsilon(1e-6));
}

TEST_CASE("gpt with bias = false has no bias parameters and still matches the reference") {
  auto model = make_model("gpt", tiny(toml::table{{"bias", false}}));
  const auto params = params_by_name(*model);
  for (const auto& [name, t] : params) CHECK_MESSAGE(name.find(".bias") == std::string::npos, name);
  CHECK(params.size() == 2 + 6 * L + 1);  // wte, wpe; per block 2 norms + 4 matrices; ln_f
  randomize(*model, 4);
  const at::Tensor x = tokens(3, T, V, 5), y = tokens(3, T, V, 6);
  CHECK(model_loss(*model, x, y) ==
        doctest::Approx(reference_gpt_loss(params_by_name(*model), x, y).item<double>()).epsilon(1e-6));
}

TEST_CASE("gpt dropout acts in training mode only") {
  auto model = make_model("gpt", tiny(toml::table{{"dropout", 0.5}}));
  randomize(*model, 7);
  const at::Tensor x = tokens(2, T, V, 8), y = tokens(2, T, V, 9);
  const double ref = reference_gpt_loss(params_by_name(*model), x, y).item<double>();
  model->set_training(false);
  CHECK(model_loss(*model, x, y) == doctest::Approx(ref).epsilon(1e-6));
  model->set_training(true);
  at::manual_seed(0);  // the host seeds the default generator; dropout draws from it
  const double a = model_loss(*model, x, y);
  at::manual_seed(0);
  CHECK(model_loss(*model, x, y) == a);
  CHECK(std::abs(a - ref) > 1e-3);
}

TEST_CASE("gradients reach every gpt parameter through the host's flat buffers") {
  auto model = make_model("gpt", tiny());
  randomize(*model, 10);
  const std::vector<loom::ModelParam> params = model->params();
  loom::FlatParams flat(params);  // rebinds every parameter into one buffer, as the trainer does
  const at::Tensor x = tokens(2, T, V, 11), y = tokens(2, T, V, 12);
  const at::Tensor loss = model->loss_sum(x, y);
  CHECK(loss.item<double>() ==
        doctest::Approx(reference_gpt_loss(params_by_name(*model), x, y).item<double>()).epsilon(1e-6));
  loss.backward();
  for (const loom::ModelParam& p : params) {
    CAPTURE(p.name);
    REQUIRE(p.tensor->grad().defined());
    CHECK(p.tensor->grad().isfinite().all().item<bool>());
    CHECK(p.tensor->grad().abs().sum().item<double>() > 0.0);
  }
  CHECK(flat.grad_norm().item<double>() > 0.0);
}

TEST_CASE("gpt names both numbers when inputs exceed seq_len, and out-of-vocabulary ids by position") {
  auto model = make_model("gpt", tiny());
  const std::string long_input = failure_message([&] { model_loss(*model, tokens(1, 9, V, 0), tokens(1, 9, V, 1)); });
  CHECK(long_input.find("sequence length 9 exceeds the model's seq_len 8") != std::string::npos);
  CHECK(long_input.find("[model] gpt") != std::string::npos);

  at::Tensor x = tokens(2, T, V, 0);
  x.index_put_({1, 3}, V);
  const std::string bad_id = failure_message([&] { model_loss(*model, x, tokens(2, T, V, 1)); });
  CHECK(bad_id.find("input token id 32 at batch row 1, position 3 is outside the vocabulary [0, 32)") !=
        std::string::npos);
  at::Tensor y = tokens(2, T, V, 1);
  y.index_put_({0, 5}, -3);
  CHECK(failure_message([&] { model_loss(*model, tokens(2, T, V, 0), y); }).find("target token id -3") !=
        std::string::npos);
}

TEST_CASE("gpt flops_per_token is 6 N + 12 L C T, N without the position embeddings") {
  auto model = make_model("gpt", tiny());
  int64_t n = 0;
  for (const auto& [name, t] : params_by_name(*model))
    if (name != "transformer.wpe.weight") n += t.numel();
  CHECK(model->flops_per_token() == doctest::Approx(6.0 * double(n) + 12.0 * L * C * T));
}

TEST_CASE("gpt options are checked with messages that name the option and the fix") {
  const std::string heads = create_error(toml::table{{"n_embd", 15}});
  CHECK(heads.find("n_embd (15) must be a positive multiple of n_head (2)") != std::string::npos);
  CHECK(create_error(toml::table{{"dropout", 1.0}}).find("dropout must be in [0, 1)") != std::string::npos);
  CHECK(create_error(toml::table{{"seq_len", 0}}).find("seq_len must be at least 1") != std::string::npos);
  CHECK(create_error(toml::table{{"n_head", 0}}).find("n_head must be at least 1") != std::string::npos);
  CHECK(create_error(toml::table{{"init_std", -1.0}}).find("init_std must be positive") != std::string::npos);
}

TEST_CASE("gpt init depends on the seed only, with GPT-2's scaled c_proj std") {
  const toml::table wide = tiny(toml::table{{"n_layer", 8}, {"n_embd", 64}});
  auto a = make_model("gpt", wide, 5);
  (void)at::randn({100});  // touching the default generator must not matter
  auto b = make_model("gpt", wide, 5);
  auto c = make_model("gpt", wide, 6);
  const auto pa = params_by_name(*a), pb = params_by_name(*b), pc = params_by_name(*c);
  for (const auto& [name, t] : pa) CHECK_MESSAGE(at::equal(t, pb.at(name)), name);
  CHECK(!at::equal(pa.at("transformer.wte.weight"), pc.at("transformer.wte.weight")));
  const double fc_std = pa.at("transformer.h.0.mlp.c_fc.weight").std().item<double>();
  const double proj_std = pa.at("transformer.h.0.mlp.c_proj.weight").std().item<double>();
  CHECK(fc_std == doctest::Approx(0.02).epsilon(0.05));
  CHECK(proj_std == doctest::Approx(0.02 / std::sqrt(2.0 * 8)).epsilon(0.05));  // 1 / sqrt(2 n_layer)
  CHECK(at::equal(pa.at("transformer.ln_f.weight"), at::ones({64})));
  CHECK(at::equal(pa.at("transformer.h.0.attn.c_attn.bias"), at::zeros({3 * 64})));
}
