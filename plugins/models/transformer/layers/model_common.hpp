// model_common.hpp: what the `gpt` and `llama` components share besides attention: option checks,
// the batch check (length and token range), the row-parallel sum and the training FLOPs estimate. Header-only, in
// the plugin-local namespace loom_gpt.
#pragma once

#include <ATen/ATen.h>
#include <loom/plugin.hpp>
#include <loom/tensor_parallel.hpp>

#include <initializer_list>
#include <string>
#include <utility>

namespace loom_gpt {

// Option checks: each message names the component, the option and the fix.
inline void require(bool ok, const std::string& message) {
  if (!ok) throw loom::Error(message);
}

// True when both are contiguous int64 CPU tensors whose ids all lie in [0, vocab) (targets may
// be LOOM_IGNORE_INDEX): one pass over the memory, no tensor ops, so the common case costs
// nothing next to the step. False means "not known": check_batch then looks closer.
inline bool ids_in_range_on_cpu(const at::Tensor& inputs, const at::Tensor& targets, int64_t vocab) {
  const auto plain = [](const at::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == at::kLong && t.is_contiguous();
  };
  if (!plain(inputs) || !plain(targets)) return false;
  const int64_t* in = inputs.data_ptr<int64_t>();
  const int64_t* tg = targets.data_ptr<int64_t>();
  bool ok = true;
  for (int64_t i = 0, n = inputs.numel(); i < n; ++i) ok &= in[i] >= 0 && in[i] < vocab;
  for (int64_t i = 0, n = targets.numel(); i < n; ++i) ok &= (tg[i] >= 0 && tg[i] < vocab) || tg[i] == LOOM_IGNORE_INDEX;
  return ok;
}

// Throws a loom::Error unless inputs fit the model: at most seq_len positions and every token
// id in [0, V). Targets may also be LOOM_IGNORE_INDEX. CPU batches are scanned in place; others
// take one small reduction and one host sync, so on a GPU only while scan_device_ids is set
// (CausalLm: the first batch). After that an id out of range still stops the run loudly: the
// CUDA embedding and cross-entropy kernels assert on it.
inline void check_batch(const char* component, const at::Tensor& inputs, const at::Tensor& targets, int64_t seq_len,
                        int64_t vocab, bool scan_device_ids = true) {
  if (inputs.dim() != 2)
    throw loom::Error(std::string(component) + ": inputs must be (B, T) token ids, got " +
                      std::to_string(inputs.dim()) + " dimensions");
  const int64_t T = inputs.size(1);
  if (T > seq_len)
    throw loom::Error(std::string(component) + ": sequence length " + std::to_string(T) +
                      " exceeds the model's seq_len " + std::to_string(seq_len) +
                      "; raise model.seq_len to at least " + std::to_string(T) + " or shorten the data's seq_len");
  if (inputs.numel() == 0) return;
  if (ids_in_range_on_cpu(inputs, targets, vocab)) return;
  if (!inputs.is_cpu() && !scan_device_ids) return;
  const at::Tensor valid_targets = targets.masked_fill(targets.eq(LOOM_IGNORE_INDEX), 0);
  const at::Tensor range = at::stack({inputs.min(), inputs.max(), valid_targets.min(), valid_targets.max()}).cpu();
  const int64_t* r = range.data_ptr<int64_t>();
  for (int which = 0; which < 2; ++which) {
    if (r[2 * which] >= 0 && r[2 * which + 1] < vocab) continue;
    const at::Tensor& ids = which == 0 ? inputs : valid_targets;
    const at::Tensor where = at::logical_or(ids.lt(0), ids.ge(vocab)).nonzero().cpu();  // (N, 2)
    const int64_t b = where[0][0].item<int64_t>(), t = where[0][1].item<int64_t>();
    throw loom::Error(std::string(component) + ": " + (which == 0 ? "input" : "target") + " token id " +
                      std::to_string(ids[b][t].item<int64_t>()) + " at batch row " + std::to_string(b) +
                      ", position " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(vocab) +
                      "); raise model.vocab_size or check the dataset's tokens");
  }
}

// Under tensor parallelism every count the group cuts (heads, hidden units, vocabulary) must
// divide evenly, and dropout is refused (every rank would draw the same masks for its own
// heads). counts: (value, what it is, as "the heads (n_head)"). Throws a loom::Error naming
// the component.
inline void check_tensor_split(const std::string& component, const loom::tensor_parallel::Group& g,
                               std::initializer_list<std::pair<int64_t, const char*>> counts, double dropout) {
  if (!g.split()) return;
  for (const auto& [n, what] : counts)
    require(n % g.size == 0, component + ": " + what + " = " + std::to_string(n) + " is not a multiple of " +
                                 "[distributed] tensor_parallel = " + std::to_string(g.size) +
                                 "; choose a tensor_parallel that divides it");
  require(dropout == 0.0, component + ": dropout = " + std::to_string(dropout) +
                              " with [distributed] tensor_parallel > 1 would draw the same masks on every rank's "
                              "heads; set dropout = 0 (tensor-parallel dropout is not built yet)");
}

// A row-parallel layer's output (loom/tensor_parallel.hpp) from this rank's product without
// its bias: summed over the group, then the whole bias (which may be undefined) added once.
inline at::Tensor row_parallel_sum(const at::Tensor& partial, const at::Tensor& bias,
                                   const loom::tensor_parallel::Group& group) {
  const at::Tensor y = loom::tensor_parallel::leave(partial, group);
  return bias.defined() ? y + bias : y;
}

// Training FLOPs per token (forward + backward): 6 N for the weight matrix products plus
// 12 L C T for attention's q k^T and att v at full context, as in PaLM (Chowdhery et al. 2022,
// appendix B) and Chinchilla (Hoffmann et al. 2022, appendix F). N counts the parameters that
// take part in a matrix product: lookup-only tables (GPT's wpe, an untied Llama's input
// embedding) are left out.
inline double flops_per_token(int64_t matmul_params, int64_t n_layer, int64_t n_embd, int64_t seq_len) {
  return 6.0 * static_cast<double>(matmul_params) +
         12.0 * static_cast<double>(n_layer) * static_cast<double>(n_embd) * static_cast<double>(seq_len);
}

}  // namespace loom_gpt
