#include <loom_ops/chunked_loss.hpp>
#include <loom_ops/cross_entropy_rows.hpp>

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

namespace loom_ops {
namespace {

struct ChunkedLinearCrossEntropy : torch::autograd::Function<ChunkedLinearCrossEntropy> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                            const at::Tensor& targets, int64_t ignore_index, int64_t chunk_rows) {
    // A frozen output layer (LoRA) needs no weight gradient; evaluation needs none at all.
    const bool grad_hidden_wanted = hidden.requires_grad(), grad_weight_wanted = weight.requires_grad();
    const bool want_grads = grad_hidden_wanted || grad_weight_wanted;
    at::NoGradGuard no_grad;
    const int64_t N = hidden.size(0);
    at::Tensor loss = at::zeros({}, hidden.options().dtype(at::kFloat));
    at::Tensor grad_hidden = grad_hidden_wanted ? at::empty(hidden.sizes(), hidden.options()) : at::Tensor();  // (N, C)
    at::Tensor grad_weight =
        grad_weight_wanted ? at::zeros_like(weight, weight.options().dtype(at::kFloat)) : at::Tensor();  // (V, C)
    // Per chunk, besides the products, the logits are read twice and written once:
    // cross_entropy_rows gives each row's loss and writes the logits' gradient over them (zero
    // rows where the target is ignored, so the products need no mask).
    for (int64_t r0 = 0; r0 < N; r0 += chunk_rows) {
      const int64_t n = std::min(chunk_rows, N - r0);
      const at::Tensor h = hidden.narrow(0, r0, n);  // (n, C)
      const at::Tensor logits = at::mm(h, weight.t());  // (n, V) in the compute dtype
      loss += cross_entropy_rows(logits, targets.narrow(0, r0, n), ignore_index, want_grads).sum();
      if (!want_grads) continue;
      if (grad_hidden_wanted) {
        at::Tensor rows = grad_hidden.narrow(0, r0, n);  // contiguous: whole rows
        at::mm_out(rows, logits, weight);                // (n, C)
      }
      if (grad_weight_wanted) {  // (V, C), summed in fp32
        if (logits.scalar_type() == at::kFloat)
          grad_weight.addmm_(logits.t(), h);
        else
          grad_weight.add_(at::mm(logits.t(), h));
      }
    }
    if (want_grads)
      ctx->save_for_backward({grad_hidden, grad_weight_wanted ? grad_weight.to(weight.scalar_type()) : at::Tensor()});
    return loss;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& scale = grads[0];  // a scalar: d(objective)/d(loss)
    const auto scaled = [&](const at::Tensor& g) { return g.defined() ? g * scale.to(g.scalar_type()) : at::Tensor(); };
    return {scaled(saved[0]), scaled(saved[1]), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

int64_t loss_chunk_rows(int64_t vocab, at::DeviceType device) {
  const int64_t values = device == at::kCUDA ? int64_t{1} << 27 : int64_t{1} << 25;
  return std::max<int64_t>(1, values / std::max<int64_t>(vocab, 1));
}

at::Tensor chunked_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                                        int64_t ignore_index, int64_t chunk_rows) {
  return ChunkedLinearCrossEntropy::apply(hidden, weight, targets, ignore_index, std::max<int64_t>(chunk_rows, 1));
}

}  // namespace loom_ops
