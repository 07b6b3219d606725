#include <loom_ops/packed_attention.hpp>

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace loom_ops {
namespace {

// Heads in parallel, each GEMM on one thread, unless the BLAS is OpenBLAS's pthreads build,
// which would run every call on its own pool from several threads at once (there the heads go
// one by one). MKL in the PyTorch wheels and OpenBLAS's OpenMP build run serial inside a
// parallel region.
bool heads_in_parallel() {
  static const bool yes = [] {
    const auto get_parallel = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
    return !get_parallel || get_parallel() == 2;
  }();
  return yes;
}

template <typename F>
void for_each_head(int64_t heads, const F& f) {
  if (heads_in_parallel()) {
    at::parallel_for(0, heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) f(i);
    });
  } else {
    for (int64_t i = 0; i < heads; ++i) f(i);
  }
}

// Causal blocks: query rows [r0, r0 + kBlock) see keys [0, r0 + kBlock) only, so each product
// skips the blocks above the diagonal, whose probabilities are exactly 0 (the mask puts -inf
// there): 10/16 of the full products' work at T = 256. The skipped scores keep the mask's -inf.
constexpr int64_t kBlock = 64;

template <typename F>
void for_each_block(int64_t T, const F& f) {  // f(first row, one past the last row)
  for (int64_t r0 = 0; r0 < T; r0 += kBlock) f(r0, std::min(T, r0 + kBlock));
}

// Row-major C (m x n) = alpha op(A) op(B) + beta C, on views of the packed buffers (no copy).
// Through LibTorch's addmm, which reaches the BLAS it was built with: the PyTorch wheels link
// MKL statically and export no cblas_sgemm to call directly. beta = 0 ignores C's contents.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const auto view = [](const float* p, int64_t rows, int64_t cols, int64_t ld, bool transposed) {
    at::Tensor t = at::from_blob(const_cast<float*>(p), {transposed ? cols : rows, transposed ? rows : cols}, {ld, 1},
                                 at::TensorOptions().dtype(at::kFloat));
    return transposed ? t.t() : t;
  };
  at::Tensor out = at::from_blob(c, {m, n}, {ldc, 1}, at::TensorOptions().dtype(at::kFloat));
  at::addmm_out(out, out, view(a, m, k, lda, ta), view(b, k, n, ldb, tb), beta, alpha);
}

// Where head i = (b, h) of the packed tensors starts: q, k, v inside qkv (row stride 3C), the
// output inside (B, T, C) (row stride C), its (T, T) scores inside (B H, T, T).
struct Heads {
  int64_t B, T, H, D, C;
  int64_t qkv_row() const { return 3 * C; }
  int64_t q(int64_t i) const { return (i / H) * T * 3 * C + (i % H) * D; }
  int64_t k(int64_t i) const { return q(i) + C; }
  int64_t v(int64_t i) const { return q(i) + 2 * C; }
  int64_t out(int64_t i) const { return (i / H) * T * C + (i % H) * D; }
  int64_t scores(int64_t i) const { return i * T * T; }
  float scale() const { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(D))); }
};

Heads heads_of(const at::Tensor& qkv, int64_t n_head) {
  const int64_t C = qkv.size(2) / 3;
  return {qkv.size(0), qkv.size(1), n_head, C / n_head, C};
}

struct PackedAttention : torch::autograd::Function<PackedAttention> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv, int64_t n_head,
                            const at::Tensor& mask) {
    const Heads s = heads_of(qkv, n_head);
    at::Tensor scores = at::empty({s.B * s.H, s.T, s.T}, qkv.options());
    const float* in = qkv.data_ptr<float>();
    const float* bias = mask.data_ptr<float>();
    const int64_t bias_row = mask.stride(0);
    float* sc = scores.data_ptr<float>();
    for_each_head(s.B * s.H, [&](int64_t i) {
      float* out = sc + s.scores(i);
      for (int64_t t = 0; t < s.T; ++t) std::memcpy(out + t * s.T, bias + t * bias_row, s.T * sizeof(float));
      for_each_block(s.T, [&](int64_t r0, int64_t r1) {  // scores[r0:r1, :r1] += scale q[r0:r1] k[:r1]^T
        gemm(false, true, r1 - r0, r1, s.D, s.scale(), in + s.q(i) + r0 * s.qkv_row(), s.qkv_row(), in + s.k(i),
             s.qkv_row(), 1.0f, out + r0 * s.T, s.T);
      });
    });
    const at::Tensor probs = at::_softmax(scores, -1, false);  // (B H, T, T)
    at::Tensor y = at::empty({s.B, s.T, s.C}, qkv.options());
    const float* p = probs.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for_each_head(s.B * s.H, [&](int64_t i) {
      for_each_block(s.T, [&](int64_t r0, int64_t r1) {  // y[r0:r1] = p[r0:r1, :r1] v[:r1]
        gemm(false, false, r1 - r0, s.D, r1, 1.0f, p + s.scores(i) + r0 * s.T, s.T, in + s.v(i), s.qkv_row(), 0.0f,
             out + s.out(i) + r0 * s.C, s.C);
      });
    });
    ctx->save_for_backward({qkv, probs});
    ctx->saved_data["n_head"] = n_head;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& qkv = saved[0];
    const at::Tensor& probs = saved[1];
    const Heads h = heads_of(qkv, ctx->saved_data["n_head"].toInt());
    const float scale = h.scale();
    const at::Tensor dy = grads[0].contiguous();  // (B, T, C)
    at::Tensor dqkv = at::empty_like(qkv);
    at::Tensor dprobs = at::empty_like(probs);
    const float* in = qkv.data_ptr<float>();
    const float* p = probs.data_ptr<float>();
    const float* g = dy.data_ptr<float>();
    float* dp = dprobs.data_ptr<float>();
    float* d = dqkv.data_ptr<float>();
    const int64_t ld = h.qkv_row();
    for_each_head(h.B * h.H, [&](int64_t i) {
      for_each_block(h.T, [&](int64_t r0, int64_t r1) {
        float* dp_rows = dp + h.scores(i) + r0 * h.T;  // dp[r0:r1, :r1] = dy[r0:r1] v[:r1]^T, 0 beyond
        gemm(false, true, r1 - r0, r1, h.D, 1.0f, g + h.out(i) + r0 * h.C, h.C, in + h.v(i), ld, 0.0f, dp_rows, h.T);
        for (int64_t t = 0; t < r1 - r0; ++t) std::fill(dp_rows + t * h.T + r1, dp_rows + (t + 1) * h.T, 0.0f);
        // dv[r0:r1] = p[r0:, r0:r1]^T dy[r0:] (queries before r0 do not see these keys)
        gemm(true, false, r1 - r0, h.D, h.T - r0, 1.0f, p + h.scores(i) + r0 * h.T + r0, h.T, g + h.out(i) + r0 * h.C,
             h.C, 0.0f, d + h.v(i) + r0 * ld, ld);
      });
    });
    const at::Tensor dscores = at::_softmax_backward_data(dprobs, probs, -1, probs.scalar_type());
    dprobs.reset();
    const float* ds = dscores.data_ptr<float>();
    for_each_head(h.B * h.H, [&](int64_t i) {
      for_each_block(h.T, [&](int64_t r0, int64_t r1) {
        // dq[r0:r1] = scale ds[r0:r1, :r1] k[:r1]; dk[r0:r1] = scale ds[r0:, r0:r1]^T q[r0:]
        gemm(false, false, r1 - r0, h.D, r1, scale, ds + h.scores(i) + r0 * h.T, h.T, in + h.k(i), ld, 0.0f,
             d + h.q(i) + r0 * ld, ld);
        gemm(true, false, r1 - r0, h.D, h.T - r0, scale, ds + h.scores(i) + r0 * h.T + r0, h.T,
             in + h.q(i) + r0 * ld, ld, 0.0f, d + h.k(i) + r0 * ld, ld);
      });
    });
    return {dqkv, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool packed_attention_applies(const at::Tensor& qkv, const at::Tensor& mask, double dropout_p, bool training) {
  const auto plain = [](const at::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == at::kFloat; };
  return plain(qkv) && plain(mask) && qkv.dim() == 3 && qkv.is_contiguous() && mask.dim() == 2 &&
         mask.stride(1) == 1 && mask.size(0) >= qkv.size(1) && !(dropout_p > 0.0 && training);
}

at::Tensor packed_causal_attention(const at::Tensor& qkv, int64_t n_head, const at::Tensor& mask) {
  return PackedAttention::apply(qkv, n_head, mask);
}

}  // namespace loom_ops
