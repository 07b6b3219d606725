// backend_harness.hpp: loads the real checkpoint-backend plugins the way the host does
// (loom::load_plugins into a loom::Registry, options resolved by loom::resolve_options) and
// drives them through the kernel's own loom::CheckpointBackendInstance, so the tests see
// exactly what the checkpoint manager sees: files on disk, copied tensors, Failures.
#pragma once

#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <toml++/toml.h>
#include <utility>
#include <vector>

#include "abi/checkpoint_backend.hpp"
#include "base/failure.hpp"
#include "config/options.hpp"
#include "abi/plugin_loader.hpp"
#include "abi/registry.hpp"
#include "plugin_slots.hpp"
#include "run_host.hpp"

namespace loom_test {

namespace fs = std::filesystem;

// One backend instance, configured like `[checkpoint] use = "<component>"` plus options.
inline std::unique_ptr<loom::CheckpointBackendInstance> make_backend(const std::string& component,
                                                                      const toml::table& options = {}) {
  const loom::SlotConfig slot = plugin_slot(LOOM_KIND_CHECKPOINT, "checkpoint", component, options);
  loom::RunContext run;
  run.run_dir = (fs::path(LOOM_TEST_TMP) / "checkpoint-run").string();
  run.device = "cpu";
  run.total_steps = 10;
  fs::create_directories(run.run_dir);
  return std::make_unique<loom::CheckpointBackendInstance>(slot, run);
}

// The Failure a call throws: its exit code and message. code 0 means nothing was thrown.
struct Caught {
  int code = 0;
  std::string message;
};
template <class Fn>
Caught catch_failure(Fn&& fn) {
  try {
    fn();
  } catch (const loom::Failure& f) {
    return {static_cast<int>(f.code()), f.what()};
  }
  return {};
}

// A tensor of the given dtype and shape whose bytes are pseudo-random (so floats include NaN
// payloads, infinities, negative zeros and subnormals): bit-exactness is the only fair test.
inline at::Tensor random_bits(at::ScalarType type, std::vector<int64_t> shape, uint32_t seed) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
  std::mt19937 gen(seed);
  auto* p = static_cast<unsigned char*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<unsigned char>(gen() & 0xFF);
  return t;
}

// The tensors every round trip uses: each dtype the ABI carries, 0-d and empty tensors, odd
// sizes (so alignment matters), and a float tensor with hand-picked special values.
inline loom::NamedTensors sample_tensors() {
  loom::NamedTensors out;
  out.emplace_back("model.embed.weight", random_bits(at::kFloat, {5, 7}, 1));
  out.emplace_back("model.norm.bias", random_bits(at::kDouble, {3}, 2));
  out.emplace_back("model.half", random_bits(at::kHalf, {3, 1, 3}, 3));
  out.emplace_back("model.bf16", random_bits(at::kBFloat16, {7}, 4));
  out.emplace_back("counters.step", at::scalar_tensor(int64_t(1234567890123), at::kLong));
  out.emplace_back("data.position", random_bits(at::kInt, {2, 2, 2}, 5));
  out.emplace_back("rng.cpu", random_bits(at::kByte, {13}, 6));
  out.emplace_back("optimizer.empty", at::empty({0, 3}, at::kFloat));
  out.emplace_back("optimizer.empty_long", at::empty({0}, at::kLong));
  out.emplace_back("scalar.f64", at::scalar_tensor(-0.0, at::kDouble));
  at::Tensor special = at::empty({6}, at::kFloat);
  const uint32_t bits[6] = {0x7fc00001u /* NaN with payload */, 0xff800000u /* -inf */, 0x80000000u /* -0 */,
                            0x00000001u /* smallest subnormal */, 0x7f7fffffu /* max */, 0x3f800000u /* 1 */};
  std::memcpy(special.data_ptr(), bits, sizeof bits);
  out.emplace_back("model.special", special);
  return out;
}

// Metadata with every JSON feature that might get mangled: escapes, non-ASCII, nesting.
inline std::string sample_metadata() {
  return R"({"step":1234,"manifest":"[model]\nuse = \"gpt\"\n","name":"r\u00e9sum\u00e9 \u2713 ünï","nested":{"a":[1,2.5,null,true]},"tab":"\t"})";
}

inline bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0);
}

// Checks that `loaded` holds exactly `expected`, bit for bit.
inline void check_same(const loom::NamedTensors& expected, const loom::LoadedCheckpoint& loaded) {
  CHECK(loaded.tensors.size() == expected.size());
  for (const auto& [name, tensor] : expected) {
    const auto it = loaded.tensors.find(name);
    REQUIRE_MESSAGE(it != loaded.tensors.end(), "tensor " << name << " missing after load");
    CHECK_MESSAGE(std::string(c10::toString(it->second.scalar_type())) == c10::toString(tensor.scalar_type()), name);
    CHECK_MESSAGE(it->second.sizes().vec() == tensor.sizes().vec(), name);
    CHECK_MESSAGE(same_bytes(it->second, tensor), name << " differs after the round trip");
  }
}

inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
inline void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A fresh, empty checkpoint directory as the manager would hand a backend.
inline fs::path fresh_dir(const std::string& name) { return tmp_dir("checkpoint_backends/" + name); }

// CRC-32 (IEEE, as zlib.crc32 computes it), for comparing with Python.
inline uint32_t crc32(const void* data, size_t size) {
  uint32_t crc = 0xFFFFFFFFu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

}  // namespace loom_test
