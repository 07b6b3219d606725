// generation.cpp: see generation.hpp.
#include "cli/generation.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include "base/failure.hpp"

namespace loom {

namespace {

int64_t pick(const at::Tensor& last_logits, const SamplingOptions& o, at::Generator& gen) {
  at::Tensor logits = last_logits.to(at::kDouble);
  if (o.temperature <= 0) return logits.argmax().item<int64_t>();
  logits = logits / o.temperature;
  if (o.top_k > 0 && o.top_k < logits.size(0)) {
    const at::Tensor kth = std::get<0>(logits.topk(o.top_k)).min();
    logits = logits.masked_fill(logits < kth, -INFINITY);
  }
  at::Tensor probs = logits.softmax(0);
  if (o.top_p < 1.0) {  // the smallest set of most likely tokens whose mass reaches top_p
    const auto [sorted, order] = probs.sort(0, /*descending=*/true);
    const at::Tensor before = sorted.cumsum(0) - sorted;  // mass of the tokens ranked above each
    const at::Tensor drop = before >= o.top_p;
    probs = probs.index_put({order.masked_select(drop)}, at::zeros({}, probs.options()));
    probs = probs / probs.sum();
  }
  return at::multinomial(probs, 1, /*replacement=*/false, gen).item<int64_t>();
}

// Next-token logits (V) after `sequence`, computed the cheapest way the model allows: with its
// key/value cache (ABI 1.4 decode) only the tokens the cache has not seen; without one, or once
// the sequence outgrows the context, the newest `context` tokens from scratch.
class NextLogits {
 public:
  NextLogits(ModelInstance& model, int64_t context, bool use_cache)
      : model_(model), context_(context), cached_(use_cache && model.has_decode()) {}

  at::Tensor operator()(const std::vector<int64_t>& sequence) {
    const int64_t n = static_cast<int64_t>(sequence.size());
    const bool fits = n <= context_;
    if (cached_ && fits && past_ > 0 && past_ < n) return last(model_.decode(window(sequence, past_), past_), n);
    const int64_t from = fits ? 0 : n - context_;
    const at::Tensor inputs = window(sequence, from);
    if (cached_ && fits) return last(model_.decode(inputs, 0), n);
    past_ = 0;  // past the context: the window slides, and every position moves
    return model_.logits(inputs)[0][inputs.size(1) - 1];
  }

 private:
  static at::Tensor window(const std::vector<int64_t>& sequence, int64_t from) {
    const std::vector<int64_t> ids(sequence.begin() + static_cast<std::ptrdiff_t>(from), sequence.end());
    return at::tensor(ids, at::kLong).unsqueeze(0);  // (1, T)
  }
  at::Tensor last(const at::Tensor& logits, int64_t n) {
    past_ = n;
    return logits[0][logits.size(1) - 1];
  }

  ModelInstance& model_;
  const int64_t context_;
  const bool cached_;
  int64_t past_ = 0;  // positions in the model's cache
};

}  // namespace

void check_sampling(const SamplingOptions& o) {
  if (!(o.temperature >= 0)) throw usage_failure("generate: --temperature must be 0 (greedy) or positive");
  if (o.top_k < 0) throw usage_failure("generate: --top-k must be 0 (off) or positive");
  if (!(o.top_p > 0 && o.top_p <= 1)) throw usage_failure("generate: --top-p must be in (0, 1]");
  if (o.max_new_tokens < 1) throw usage_failure("generate: --max-new-tokens must be at least 1");
}

std::vector<int64_t> generate_tokens(ModelInstance& model, const std::vector<int64_t>& prompt, const SamplingOptions& o,
                                     const std::set<int64_t>& stop, const std::function<void(int64_t)>& on_token) {
  at::Generator gen = at::detail::createCPUGenerator(o.seed);
  std::vector<int64_t> sequence = prompt, added;
  at::NoGradGuard no_grad;
  model.set_training(false);
  NextLogits next_logits(model, o.context, o.use_cache);
  for (int64_t n = 0; n < o.max_new_tokens; ++n) {
    const int64_t next = pick(next_logits(sequence).cpu(), o, gen);
    sequence.push_back(next);
    added.push_back(next);
    on_token(next);
    if (stop.count(next)) break;
  }
  return added;
}

}  // namespace loom
