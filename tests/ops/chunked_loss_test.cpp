// The chunked output-layer loss (ops/chunked_loss/chunked_loss.cpp) against
// LibTorch's cross-entropy on the whole logits in double: the loss sum and the gradients of the
// hidden rows and of the weight, with ignored targets, a partial last chunk, a scaled upstream
// gradient, bf16 products, a frozen weight, and no gradients at all (evaluation).
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <loom_ops/chunked_loss.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <vector>


namespace {

constexpr int64_t N = 37, C = 16, V = 50, kIgnore = -100;

double error(const at::Tensor& got, const at::Tensor& want) {
  return ((got.to(at::kDouble) - want).abs().max() / want.abs().max()).item<double>();
}

struct Inputs {
  at::Tensor hidden, weight, targets;
};

Inputs make_inputs() {
  at::manual_seed(21);
  at::Tensor targets = at::randint(0, V, {N}, at::kLong);
  targets.index_put_({at::arange(0, N, 5)}, kIgnore);  // every fifth row carries no loss
  return {at::randn({N, C}), at::randn({V, C}) * 0.5, targets};
}

// The whole-logits reference in double: loss, d loss / d hidden, d loss / d weight.
std::vector<at::Tensor> reference(const Inputs& in, double upstream) {
  std::vector<at::Tensor> x{in.hidden.to(at::kDouble).requires_grad_(true), in.weight.to(at::kDouble).requires_grad_(true)};
  const at::Tensor loss =
      at::cross_entropy_loss(at::mm(x[0], x[1].t()), in.targets, {}, at::Reduction::Sum, kIgnore);
  const auto grads = torch::autograd::grad({loss * upstream}, x);
  return {loss.detach(), grads[0], grads[1]};
}

}  // namespace

TEST_CASE("chunked loss: the whole logits' loss and gradients, chunk by chunk") {
  const Inputs in = make_inputs();
  const auto want = reference(in, 0.25);
  for (const int64_t chunk : {int64_t{8}, int64_t{1}, N, int64_t{1000}}) {
    std::vector<at::Tensor> x{in.hidden.clone().requires_grad_(true), in.weight.clone().requires_grad_(true)};
    const at::Tensor loss = loom_ops::chunked_linear_cross_entropy(x[0], x[1], in.targets, kIgnore, chunk);
    const auto grads = torch::autograd::grad({loss * 0.25}, x);
    INFO("chunk rows " << chunk);
    CHECK((loss.scalar_type() == at::kFloat));
    CHECK(error(loss, want[0]) < 1e-6);
    CHECK(error(grads[0], want[1]) < 1e-6);
    CHECK(error(grads[1], want[2]) < 1e-6);
    // Ignored rows get no gradient.
    CHECK(grads[0].index({at::arange(0, N, 5)}).abs().max().item<double>() == 0.0);
  }
}

TEST_CASE("chunked loss: bf16 products stay close; evaluation computes no gradients") {
  const Inputs in = make_inputs();
  const auto want = reference(in, 1.0);
  std::vector<at::Tensor> x{in.hidden.to(at::kBFloat16).requires_grad_(true),
                            in.weight.to(at::kBFloat16).requires_grad_(true)};
  const at::Tensor loss = loom_ops::chunked_linear_cross_entropy(x[0], x[1], in.targets, kIgnore, 8);
  const auto grads = torch::autograd::grad({loss}, x);
  CHECK((grads[0].scalar_type() == at::kBFloat16));
  CHECK(error(loss, want[0]) < 1e-2);
  CHECK(error(grads[0], want[1]) < 3e-2);
  CHECK(error(grads[1], want[2]) < 3e-2);
  const at::Tensor plain = loom_ops::chunked_linear_cross_entropy(in.hidden, in.weight, in.targets, kIgnore, 8);
  CHECK_FALSE(plain.requires_grad());
  CHECK(error(plain, want[0]) < 1e-6);
  // A frozen output layer (LoRA): only the hidden rows get a gradient, the same as before.
  const at::Tensor h = in.hidden.clone().requires_grad_(true);
  const at::Tensor frozen = loom_ops::chunked_linear_cross_entropy(h, in.weight, in.targets, kIgnore, 8);
  CHECK(error(torch::autograd::grad({frozen}, {h})[0], reference(in, 1.0)[1]) < 1e-6);
  CHECK(loom_ops::loss_chunk_rows(50304, at::kCUDA) == 2668);  // GPT-2: 7 chunks at batch 16 x 1024
  CHECK(loom_ops::loss_chunk_rows(50304, at::kCPU) == 667);    // 25
}
