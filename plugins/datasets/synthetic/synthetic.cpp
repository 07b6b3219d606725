// synthetic.cpp: the `synthetic` dataset. Endless token sequences that follow a fixed linear
// congruential rule with random corruptions, so a model has something learnable without any
// data file. Torch-free; every token is a pure function of (run seed, global sample index),
// which makes batches identical across restarts and disjoint across ranks.
#include <loom/dataset.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace {

// Counter-based RNG: draw k of a sample is a hash of (key, k), so no state needs saving.
uint64_t mix64(uint64_t z) {  // splitmix64 finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

struct SampleRng {
  uint64_t key;
  SampleRng(uint64_t seed, uint64_t index) : key(mix64(seed ^ mix64(index + kGamma))) {}
  uint64_t draw(uint64_t k) const { return mix64(key + (k + 1) * kGamma); }
  double unit(uint64_t k) const { return static_cast<double>(draw(k) >> 11) * 0x1.0p-53; }
};

constexpr uint64_t kMul = 37, kAdd = 11;  // A odd, C odd: a full-period rule when V = 2^n
constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'S', 'Y', 'N', '1'};
constexpr char kMagic2[8] = {'L', 'O', 'O', 'M', 'S', 'Y', 'N', '2'};
constexpr int64_t kMaxVocab = int64_t(1) << 32;  // keeps x * A far from uint64 overflow

class Synthetic final : public loom::Dataset {
 public:
  static constexpr const char* name = "synthetic";
  static constexpr const char* summary =
      "Deterministic noisy token sequences x[t+1] = (37*x[t] + 11) mod vocab_size; no files needed.";
  static constexpr loom_option_spec options[] = {
      loom::option("batch_size", LOOM_OPTION_TYPE_INT, "8", "Sequences per micro-batch (B)."),
      loom::option("seq_len", LOOM_OPTION_TYPE_INT, "64", "Tokens per sequence (T)."),
      loom::option("vocab_size", LOOM_OPTION_TYPE_INT, "256",
                   "Token ids are in [0, vocab_size); match the model's vocabulary."),
      loom::option("noise", LOOM_OPTION_TYPE_FLOAT, "0.1",
                   "Probability that a token is replaced by a uniform random one (0 to 1)."),
  };

  Synthetic(const loom::Config& c, const loom::Context& ctx)
      : B_(c.i64("batch_size")), T_(c.i64("seq_len")), V_(c.i64("vocab_size")),
        noise_(c.f64("noise")), seed_(ctx.seed), rank_(ctx.rank), world_(ctx.world_size) {
    if (B_ <= 0) throw loom::Error("synthetic: batch_size must be positive, got " + std::to_string(B_));
    if (T_ <= 0) throw loom::Error("synthetic: seq_len must be positive, got " + std::to_string(T_));
    if (V_ < 2 || V_ > kMaxVocab)
      throw loom::Error("synthetic: vocab_size must be in [2, 2^32], got " + std::to_string(V_) +
                        "; set it to the model's vocabulary size");
    if (!(noise_ >= 0.0 && noise_ <= 1.0))  // also rejects NaN
      throw loom::Error("synthetic: noise must be a probability in [0, 1], got " + std::to_string(noise_));
    if (B_ > (int64_t(1) << 31) / (T_ + 1))
      throw loom::Error("synthetic: batch_size * seq_len is too large; lower one of them");
  }

  Batch next() override {
    std::vector<int64_t> inputs(size_t(B_ * T_)), targets(size_t(B_ * T_));
    std::vector<uint64_t> x(size_t(T_ + 1));
    const uint64_t V = uint64_t(V_);
    for (int64_t b = 0; b < B_; ++b) {
      // Ranks interleave whole batches, so no two ranks ever see the same sample.
      const uint64_t index = (batches_ * uint64_t(world_) + uint64_t(rank_)) * uint64_t(B_) + uint64_t(b);
      const SampleRng rng(seed_, index);
      x[0] = rng.draw(0) % V;
      for (int64_t t = 0; t < T_; ++t) {
        const uint64_t k = 2 * uint64_t(t) + 1;  // two draws per step: noise test, random token
        x[t + 1] = rng.unit(k) < noise_ ? rng.draw(k + 1) % V : (x[t] * kMul + kAdd) % V;
      }
      for (int64_t t = 0; t < T_; ++t) {
        inputs[size_t(b * T_ + t)] = int64_t(x[size_t(t)]);
        targets[size_t(b * T_ + t)] = int64_t(x[size_t(t + 1)]);
      }
    }
    ++batches_;
    return {loom::dlpack_int64(std::move(inputs), {B_, T_}),
            loom::dlpack_int64(std::move(targets), {B_, T_})};
  }

  // State: "LOOMSYN2" then the samples every rank together has drawn (uint64 little-endian), so
  // that a resume at another world size or batch size draws the next ones, as an uninterrupted
  // run would, and never one already seen. "LOOMSYN1" records (batches produced by this rank,
  // before 2026-12) still load, as they always did, in the world that wrote them.
  std::string save_state() const override {
    const uint64_t samples = batches_ * uint64_t(world_) * uint64_t(B_);
    std::string s(kMagic2, sizeof kMagic2);
    for (int i = 0; i < 8; ++i) s.push_back(char((samples >> (8 * i)) & 0xFF));
    return s;
  }

  void load_state(const std::string& s) override {
    const bool v1 = s.size() == 16 && std::memcmp(s.data(), kMagic, sizeof kMagic) == 0;
    const bool v2 = s.size() == 16 && std::memcmp(s.data(), kMagic2, sizeof kMagic2) == 0;
    if (!v1 && !v2)
      throw loom::Error("synthetic: dataset state is not a LOOMSYN2 record (" + std::to_string(s.size()) +
                        " bytes, expected 16); the checkpoint was written by another dataset or version. "
                        "Resume with the dataset that wrote it, or start a fresh run");
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(s[size_t(8 + i)])) << (8 * i);
    if (v1) {
      batches_ = n;
      return;
    }
    // The host lets a resume change the world and batch sizes only where the global batch stays
    // the same, which divides n; another caller could still ask for a split that does not.
    const uint64_t per_round = uint64_t(world_) * uint64_t(B_);  // samples the ranks draw per batch
    if (n % per_round != 0)
      throw loom::Error("synthetic: the checkpoint's ranks drew " + std::to_string(n) + " samples, which " +
                        std::to_string(world_) + " ranks of batch_size " + std::to_string(B_) +
                        " cannot continue without skipping or repeating some; resume with a world size and batch "
                        "size whose product divides it");
    batches_ = n / per_round;
  }

 private:
  int64_t B_, T_, V_;
  double noise_;
  uint64_t seed_;
  int32_t rank_, world_;
  uint64_t batches_ = 0;
};

}  // namespace

LOOM_PLUGIN("synthetic", "0.1.0", loom::component<Synthetic>())
