#include <loom_ops/chunked_loss.hpp>

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
    at::Tensor grad_hidden = grad_hidden_wanted ? at::empty_like(hidden) : at::Tensor();  // (N, C)
    at::Tensor grad_weight =
        grad_weight_wanted ? at::zeros_like(weight, weight.options().dtype(at::kFloat)) : at::Tensor();  // (V, C)
    // Per chunk, two passes over the (n, V) values besides the products: the log-softmax reads
    // the logits in the compute dtype and writes fp32; the softmax (the logits' gradient but at
    // the targets) is written straight back in the compute dtype for the products.
    const at::ScalarType dtype = hidden.scalar_type();
    for (int64_t r0 = 0; r0 < N; r0 += chunk_rows) {
      const int64_t n = std::min(chunk_rows, N - r0);
      const at::Tensor h = hidden.narrow(0, r0, n);                                  // (n, C)
      const at::Tensor t = targets.narrow(0, r0, n);                                 // (n)
      const at::Tensor counted = t.ne(ignore_index);                                 // (n) bool
      const at::Tensor index = t.masked_fill(counted.logical_not(), 0).unsqueeze(1);  // (n, 1)
      at::Tensor log_probs = at::log_softmax(at::mm(h, weight.t()), -1, at::kFloat);  // (n, V) fp32
      const at::Tensor picked = log_probs.gather(1, index);                           // (n, 1) log p_t
      loss -= picked.squeeze(1).masked_fill(counted.logical_not(), 0.0).sum();
      if (!want_grads) continue;
      // d(-log p_t)/d logits = softmax - one_hot(t). The target's entry, p_t - 1, is formed in
      // fp32 and rounded once; rows that do not count are zeroed on the (n, C) side.
      at::Tensor grad_logits;
      if (dtype == at::kFloat) {
        grad_logits = log_probs.exp_();  // in place: no new (n, V) block
      } else {
        grad_logits = at::empty_like(log_probs, dtype);
        at::exp_out(grad_logits, log_probs);  // one pass: read fp32, write the compute dtype
      }
      log_probs.reset();
      grad_logits.scatter_(1, index, (picked.exp() - 1.0).to(dtype));
      const at::Tensor keep = counted.unsqueeze(1).to(dtype);                        // (n, 1)
      if (grad_hidden_wanted) grad_hidden.narrow(0, r0, n).copy_(at::mm(grad_logits, weight) * keep);  // (n, C)
      if (grad_weight_wanted) grad_weight.add_(at::mm(grad_logits.t(), h * keep));  // (V, C), summed in fp32
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
