#include <loom_ops/cross_entropy_rows.hpp>

#include "cross_entropy_rows_args.hpp"

namespace loom_ops {

namespace reference {
at::Tensor cross_entropy_rows(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index,
                              bool write_gradient) {
  cross_entropy_rows_detail::check_rows(logits, targets, "reference::cross_entropy_rows");
  const at::Tensor ignored = targets.eq(ignore_index);
  const at::Tensor index = targets.masked_fill(ignored, 0).unsqueeze(1);  // (n, 1)
  const at::ScalarType wide = logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor log_probs = at::log_softmax(logits, 1, wide);            // (n, V) fp32 (double stays double)
  const at::Tensor picked = log_probs.gather(1, index);                     // (n, 1): log p_t
  if (write_gradient) {
    // d(-log p_t)/d logits = softmax - one_hot(t): the target's entry formed in fp32, rounded once.
    at::Tensor written = logits;  // the same storage
    at::exp_out(written, log_probs);
    logits.scatter_(1, index, (picked.exp() - 1.0).to(logits.scalar_type()));
    logits.masked_fill_(ignored.unsqueeze(1), 0);
  }
  return picked.squeeze(1).neg().masked_fill(ignored, 0.0);
}
}  // namespace reference

}  // namespace loom_ops
