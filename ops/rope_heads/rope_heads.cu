// The rope_heads kernels: one warp a row of D channels (a lane holds channel pairs lane,
// lane + 32, ... in registers), 8 rows a block, grid-stride over rows. The row's square sum and
// backward's dot product are warp shuffles; dw is summed per block in shared memory, then added
// to the fp32 total with one atomic per channel and block. fp32 math; forward rounds the
// normalised value to x's type before it meets w, as the reference does.
#include <type_traits>

#include "../cuda_common/elements.cuh"
#include "../cuda_common/rms_norm_math.hpp"
#include "rope_heads_kernel.hpp"
#include "rope_heads_math.hpp"

namespace loom_ops::cuda {
namespace {

using rope_heads_math::Pair;

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;
constexpr int kPairsPerLane = static_cast<int>(kRopeHeadsMostChannels / 2 / 32);

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Where row `row` of x (B T H rows of D) starts, where its result starts in y, and its table
// row's start. A position outside the table stops the kernel, as the reference's index_select does.
struct RowStarts {
  int64_t in, out, table;
};
__device__ inline RowStarts starts_of(const RopeHeadsParams& p, int64_t row) {
  const rope_heads_math::RowPlace place = rope_heads_math::place_of(row, p.T, p.H);
  const int64_t pos = p.positions ? p.positions[place.b * p.T + place.t] : place.t;
  if (pos < 0 || pos >= p.table_rows) __trap();
  return {row * p.D, place.out_row * p.D, pos * p.D};
}

template <typename T, typename O>
__global__ void __launch_bounds__(kThreads) forward_kernel(RopeHeadsParams p) {
  const T* x = static_cast<const T*>(p.x);
  const O* w = static_cast<const O*>(p.w);
  O* y = static_cast<O*>(p.y);
  const int lane = threadIdx.x % 32, half = static_cast<int>(p.D / 2);
  const int64_t rows = p.B * p.T * p.H;
  for (int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kRowsPerBlock) {
    const auto [in, out, table] = starts_of(p, row);
    Pair v[kPairsPerLane];
    float squares = 0;
    for (int k = 0, j = lane; j < half; ++k, j += 32) {
      v[k] = {load(x, in + j), load(x, in + j + half)};
      squares += v[k].lo * v[k].lo + v[k].hi * v[k].hi;
    }
    float r = 1.0f;
    if (w) {
      r = rms_norm_math::inverse_rms(warp_sum(squares), p.D, p.eps);
      if (lane == 0) p.inverse_rms[row] = r;
    }
    for (int k = 0, j = lane; j < half; ++k, j += 32) {
      Pair n = v[k];
      if (w) n = {rounded<O>(rounded<T>(n.lo * r) * load(w, j)), rounded<O>(rounded<T>(n.hi * r) * load(w, j + half))};
      const Pair c{rounded<O>(p.cos[table + j]), rounded<O>(p.cos[table + j + half])};
      const Pair s{rounded<O>(p.sin[table + j]), rounded<O>(p.sin[table + j + half])};
      const Pair turned = rope_heads_math::rotate(n, c, s);
      store(y, out + j, turned.lo);
      store(y, out + j + half, turned.hi);
    }
  }
}

template <typename T, typename O>
__global__ void __launch_bounds__(kThreads) backward_kernel(RopeHeadsParams p) {
  extern __shared__ float dw_sum[];  // D floats: this block's rows' dw (with a norm)
  const T* x = static_cast<const T*>(p.x);
  const O* w = static_cast<const O*>(p.w);
  const O* dy = static_cast<const O*>(p.dy);
  T* dx = static_cast<T*>(p.dx);
  const int lane = threadIdx.x % 32, half = static_cast<int>(p.D / 2);
  if (w) {
    for (int64_t j = threadIdx.x; j < p.D; j += kThreads) dw_sum[j] = 0;
    __syncthreads();
  }
  const int64_t rows = p.B * p.T * p.H;
  for (int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kRowsPerBlock) {
    const auto [in, out, table] = starts_of(p, row);
    Pair g[kPairsPerLane];
    float dot = 0;
    for (int k = 0, j = lane; j < half; ++k, j += 32) {
      const Pair c{p.cos[table + j], p.cos[table + j + half]}, s{p.sin[table + j], p.sin[table + j + half]};
      g[k] = rope_heads_math::rotate_back({load(dy, out + j), load(dy, out + j + half)}, c, s);
      if (w) dot += g[k].lo * load(w, j) * load(x, in + j) + g[k].hi * load(w, j + half) * load(x, in + j + half);
    }
    if (!w) {
      for (int k = 0, j = lane; j < half; ++k, j += 32) {
        store(dx, in + j, g[k].lo);
        store(dx, in + j + half, g[k].hi);
      }
      continue;
    }
    dot = warp_sum(dot);
    const float r = p.inverse_rms[row];
    for (int k = 0, j = lane; j < half; ++k, j += 32) {
      const float x_lo = load(x, in + j), x_hi = load(x, in + j + half);
      store(dx, in + j, rms_norm_math::normalised_grad(g[k].lo * load(w, j), x_lo, r, dot, p.D));
      store(dx, in + j + half, rms_norm_math::normalised_grad(g[k].hi * load(w, j + half), x_hi, r, dot, p.D));
      atomicAdd(&dw_sum[j], g[k].lo * x_lo * r);
      atomicAdd(&dw_sum[j + half], g[k].hi * x_hi * r);
    }
  }
  if (w) {
    __syncthreads();
    for (int64_t j = threadIdx.x; j < p.D; j += kThreads) atomicAdd(&p.dw[j], dw_sum[j]);
  }
}

unsigned blocks_for(int64_t rows) {
  const int64_t wanted = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return static_cast<unsigned>(wanted < 4096 ? (wanted > 0 ? wanted : 1) : 4096);
}

template <typename T, typename O>
cudaError_t launch(const RopeHeadsParams& p, cudaStream_t stream, bool backward) {
  const unsigned blocks = blocks_for(p.B * p.T * p.H);
  if (backward)
    backward_kernel<T, O><<<blocks, kThreads, p.w ? p.D * sizeof(float) : 0, stream>>>(p);
  else
    forward_kernel<T, O><<<blocks, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t dispatch(const RopeHeadsParams& p, cudaStream_t stream, bool backward) {
  if (p.D <= 0 || p.D % 2 != 0 || p.D > kRopeHeadsMostChannels) return cudaErrorInvalidValue;
  if (p.B * p.T * p.H == 0) return cudaSuccess;
  if (p.out_type != p.x_type && p.out_type != ElementType::float32) return cudaErrorInvalidValue;
  return dispatch_element_type(p.x_type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return p.out_type == p.x_type ? launch<T, T>(p, stream, backward) : launch<T, float>(p, stream, backward);
  });
}

}  // namespace

cudaError_t launch_rope_heads_forward(const RopeHeadsParams& p, cudaStream_t stream) { return dispatch(p, stream, false); }
cudaError_t launch_rope_heads_backward(const RopeHeadsParams& p, cudaStream_t stream) { return dispatch(p, stream, true); }

}  // namespace loom_ops::cuda
