// packing_test.cpp: packed rows in `gpt` and `llama` (ABI 1.2 batch fields position_ids and
// document_ids). Two documents packed into one row, positions restarting and attention kept
// inside each document, give each document the loss it has alone, to 1e-6; without the
// fields the same row gives other losses, so the fields are what makes them equal.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/core/grad_mode.h>

#include "model_harness.hpp"

using namespace loom_test;

namespace {

// The loss sum of inputs/targets with the given extra fields, as the host computes it.
double loss_with(loom::ModelInstance& model, const at::Tensor& inputs, const at::Tensor& targets,
                 const loom::BatchFields& fields) {
  at::NoGradGuard no_grad;
  return model.forward(inputs, targets, fields).loss_sum.item<double>();
}

// Targets with every position outside [begin, end) ignored: only that document carries loss.
at::Tensor only(const at::Tensor& targets, int64_t begin, int64_t end) {
  at::Tensor out = at::full_like(targets, LOOM_IGNORE_INDEX);
  out.narrow(1, begin, end - begin).copy_(targets.narrow(1, begin, end - begin));
  return out;
}

// absolute_positions: gpt's learned position table, where a document moved along the row
// changes; llama's rotary positions are relative, so within one document only attention to
// the other document changes anything.
void check_packing(loom::ModelInstance& model, int64_t vocab, bool absolute_positions) {
  const int64_t n1 = 5, n2 = 7;
  const at::Tensor doc1 = tokens(1, n1 + 1, vocab, 11), doc2 = tokens(1, n2 + 1, vocab, 12);
  const at::Tensor in1 = doc1.narrow(1, 0, n1), tg1 = doc1.narrow(1, 1, n1);
  const at::Tensor in2 = doc2.narrow(1, 0, n2), tg2 = doc2.narrow(1, 1, n2);
  const double alone1 = model_loss(model, in1, tg1), alone2 = model_loss(model, in2, tg2);

  const at::Tensor inputs = at::cat({in1, in2}, 1), targets = at::cat({tg1, tg2}, 1);  // (1, n1 + n2)
  const at::Tensor positions = at::cat({at::arange(n1, at::kLong), at::arange(n2, at::kLong)}).unsqueeze(0);
  const at::Tensor documents = at::cat({at::zeros({n1}, at::kLong), at::ones({n2}, at::kLong)}).unsqueeze(0);
  const loom::BatchFields packed = {{"position_ids", positions}, {"document_ids", documents}};
  CHECK(loss_with(model, inputs, only(targets, 0, n1), packed) == doctest::Approx(alone1).epsilon(1e-6));
  CHECK(loss_with(model, inputs, only(targets, n1, n1 + n2), packed) == doctest::Approx(alone2).epsilon(1e-6));
  // Without document_ids the second document sees the first: its loss changes.
  CHECK(loss_with(model, inputs, only(targets, n1, n1 + n2), {{"position_ids", positions}}) !=
        doctest::Approx(alone2).epsilon(1e-6));
  // Without position_ids it sits at positions n1.. instead of 0..
  const double shifted = loss_with(model, inputs, only(targets, n1, n1 + n2), {{"document_ids", documents}});
  if (absolute_positions) CHECK(shifted != doctest::Approx(alone2).epsilon(1e-6));
  else CHECK(shifted == doctest::Approx(alone2).epsilon(1e-6));
}

}  // namespace

TEST_CASE("gpt: documents packed into one row keep their own losses") {
  auto model = make_model("gpt", toml::table{{"vocab_size", 32}, {"n_layer", 2}, {"n_head", 2}, {"n_embd", 16},
                                             {"seq_len", 16}});
  randomize(*model, 3);
  check_packing(*model, 32, /*absolute_positions=*/true);
}

TEST_CASE("llama: documents packed into one row keep their own losses (rotary positions restart)") {
  auto model = make_model("llama", toml::table{{"vocab_size", 32}, {"n_layer", 2}, {"n_head", 4}, {"n_kv_head", 2},
                                               {"n_embd", 16}, {"seq_len", 16}});
  randomize(*model, 4);
  check_packing(*model, 32, /*absolute_positions=*/false);
}

TEST_CASE("rows with an attention_mask send only labelled positions through the output layer, to the same loss") {
  for (const std::string component : {"gpt", "llama"}) {
    CAPTURE(component);
    auto model = make_model(component, toml::table{{"vocab_size", 32}, {"n_layer", 2}, {"n_head", 2}, {"n_embd", 16},
                                                   {"seq_len", 16}});
    randomize(*model, 7);
    const at::Tensor inputs = tokens(2, 12, 32, 5), targets = targets_with_ignored(2, 12, 32, 6);
    const double full = loss_with(*model, inputs, targets, {});
    const double selected = loss_with(*model, inputs, targets, {{"attention_mask", at::ones({2, 12}, at::kLong)}});
    CHECK(selected == doctest::Approx(full).epsilon(1e-6));
    // and the gradient is the same
    const auto grads = [&](const loom::BatchFields& fields) {
      const std::vector<loom::ModelParam> params = model->params();
      for (const auto& p : params) p.tensor->mutable_grad() = at::Tensor();
      model->forward(inputs, targets, fields).loss_sum.backward();
      std::vector<at::Tensor> out;
      for (const auto& p : params) out.push_back(p.tensor->grad().clone());
      return out;
    };
    const auto a = grads({}), b = grads({{"attention_mask", at::ones({2, 12}, at::kLong)}});
    for (size_t i = 0; i < a.size(); ++i) CHECK(at::allclose(a[i], b[i], 1e-5, 1e-6));
  }
}

TEST_CASE("packing fields of the wrong kind are one clear error") {
  auto model = make_model("gpt", toml::table{{"vocab_size", 32}, {"n_layer", 1}, {"n_head", 2}, {"n_embd", 8},
                                             {"seq_len", 8}});
  const at::Tensor inputs = tokens(1, 4, 32, 1), targets = tokens(1, 4, 32, 2);
  const auto message = [&](const loom::BatchFields& fields) {
    return failure_message([&] { loss_with(*model, inputs, targets, fields); });
  };
  CHECK(message({{"position_ids", at::zeros({1, 4}, at::kFloat)}})
            .find("batch field \"position_ids\": expected Long of rank 2, got Float of rank 2") != std::string::npos);
  CHECK(message({{"document_ids", at::zeros({1, 3}, at::kLong)}})
            .find("gpt: batch field document_ids must have the shape of input_ids") != std::string::npos);
  CHECK(message({{"position_ids", at::full({1, 4}, 8, at::kLong)}})
            .find("gpt: position_ids must lie in [0, seq_len = 8)") != std::string::npos);
}
