// synth_rng.hpp: the random numbers of loom-ctr-synth. std::mt19937_64's raw output is the
// same in every standard library; its distributions are not, so the few this tool needs are
// written here (floating-point ones still go through libm's log, cos and sqrt).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace ctr_synth {

// SplitMix64's output mix, to turn the seed and a purpose tag into independent stream seeds.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) : engine_(mix64(seed + 0x9E3779B97F4A7C15ULL * (stream + 1))) {}

  uint64_t bits() { return engine_(); }
  double uniform() { return double(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n) { return uint64_t((unsigned __int128)engine_() * n >> 64); }  // [0, n)
  bool chance(double p) { return uniform() < p; }
  // Box-Muller; one of the pair is dropped, which keeps the stream stateless between calls.
  double normal(double sigma) {
    const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]
    return sigma * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // A geometric count of failures before a success of probability p: mean (1 - p) / p.
  uint64_t geometric(double p) {
    const double k = std::floor(std::log(1.0 - uniform()) / std::log1p(-p));
    return k < 1e9 ? uint64_t(k) : uint64_t(1e9);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace ctr_synth
