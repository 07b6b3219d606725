#include <loom_ops/check_args.hpp>
#include <loom_ops/grouped_linear.hpp>

#include <string>

namespace loom_ops {

at::Tensor tokens_per_expert(const at::Tensor& chosen, int64_t experts) {
  const at::Tensor flat = chosen.reshape({-1});
  return at::zeros({experts}, flat.options()).scatter_add(0, flat, at::ones_like(flat));
}

at::Tensor grouped_linear(const at::Tensor& rows, const std::vector<at::Tensor>& weights, const at::Tensor& counts) {
  check_arg(rows.dim() == 2, "grouped_linear",
            [&] { return "rows must be (N, in), got " + std::to_string(rows.dim()) + " dimensions"; });
  check_arg(counts.dim() == 1 && counts.size(0) == int64_t(weights.size()) && counts.scalar_type() == at::kLong,
            "grouped_linear",
            [&] { return "counts must be (E) int64 with one count per weight (" + std::to_string(weights.size()) + ")"; });
  // No dtype check: under autocast rows arrive in bf16 beside fp32 weights, and the dispatcher
  // casts both for at::_grouped_mm as it does for at::linear.
  for (const at::Tensor& w : weights)
    check_arg(w.dim() == 2 && w.size(1) == rows.size(1) && w.size(0) == weights.front().size(0), "grouped_linear",
              "every weight must be (out, in) with in = rows.size(1), all of one shape");
  const at::ScalarType t = rows.scalar_type();
  if (t != at::kFloat && t != at::kBFloat16 && t != at::kHalf) return reference::grouped_linear(rows, weights, counts);
  // (E, in, out): each expert's weight transposed; offs: where each expert's rows end.
  const at::Tensor stacked = at::stack(weights).transpose(1, 2);
  const at::Tensor ends = counts.cumsum(0).to(at::kInt).to(rows.device());
  return at::_grouped_mm(rows, stacked, ends);
}

}  // namespace loom_ops
