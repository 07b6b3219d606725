// plugin_dataset.hpp: loads the real dataset plugins the way the host does (loom::load_plugins
// into a loom::Registry, options resolved by loom::resolve_options, a loom_context per rank)
// and drives one instance through its C vtable, so tests see exactly what crosses the ABI:
// batches, state bytes and error statuses.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "plugin_state.hpp"
#include "abi/host_api.hpp"
#include "config/options.hpp"
#include "abi/plugin_loader.hpp"
#include "abi/registry.hpp"
#include "plugin_slots.hpp"
#include "run_host.hpp"
#include "plugins/datasets/common/token_file_format.hpp"

namespace loom_test {

namespace fs = std::filesystem;

// One batch as plain vectors.
struct Rows {
  int64_t B = 0, T = 0;
  std::vector<int64_t> inputs, targets;  // (B, T) row-major
  std::map<std::string, std::vector<int64_t>> fields;  // the other int64 (B, T) fields, by name
  bool operator==(const Rows& o) const { return B == o.B && T == o.T && inputs == o.inputs && targets == o.targets; }
  bool operator!=(const Rows& o) const { return !(*this == o); }
};

// For doctest's messages: the shape and the first row's inputs.
inline std::ostream& operator<<(std::ostream& out, const Rows& r) {
  out << "Rows(" << r.B << "x" << r.T << ", inputs[0..T) =";
  for (int64_t t = 0; t < r.T && t < int64_t(r.inputs.size()); ++t) out << " " << r.inputs[size_t(t)];
  return out << ")";
}

// Thrown when create fails: the status code and message the host would report.
struct CreateError : std::runtime_error {
  loom_status_code code;
  CreateError(loom_status_code c, const std::string& m) : std::runtime_error(m), code(c) {}
};

struct RunPlace {
  uint64_t seed = 0;
  int32_t rank = 0, world_size = 1;
  std::string run_dir;  // "" : a scratch folder
};

class PluginDataset {
 public:
  PluginDataset(const std::string& component, const toml::table& options, const RunPlace& place = {}) {
    const loom::SlotConfig slot = plugin_slot(LOOM_KIND_DATASET, "data", component, options);
    vt_ = loom::copy_vtable<loom_dataset_vtable>(slot.component->vtable);
    config_ = slot.config;
    slot_ = "data";
    run_dir_ = place.run_dir.empty() ? (fs::path(LOOM_TEST_TMP) / "dataset-run").string() : place.run_dir;
    device_ = "cpu";
    const loom_context context = {sizeof(loom_context), slot_.c_str(),     run_dir_.c_str(), place.seed,
                                  place.rank,           place.world_size, device_.c_str(),  100};
    if (loom_status* s = vt_.create(&context, &config_, &handle_)) {
      const loom_status_code code = loom::host_api()->status_get_code(s);
      throw CreateError(code, loom::take_status_message(s));
    }
    REQUIRE(handle_ != nullptr);
  }
  ~PluginDataset() { vt_.destroy(handle_); }
  PluginDataset(const PluginDataset&) = delete;
  PluginDataset& operator=(const PluginDataset&) = delete;

  Rows next() {
    loom_batch raw{};
    raw.struct_size = sizeof raw;
    Rows r;
    raw.fields = &r.fields;
    raw.add_field = [](void* fields, const char* name, DLManagedTensor* t) -> loom_status* {
      int64_t B = 0, T = 0;
      (*static_cast<std::map<std::string, std::vector<int64_t>>*>(fields))[name] = take(t, B, T);
      return nullptr;
    };
    if (loom_status* s = vt_.next(handle_, &raw)) FAIL("next failed: " << loom::take_status_message(s));
    if (raw.end_of_epoch) return r;  // B = 0: the epoch ended
    REQUIRE(raw.inputs != nullptr);
    REQUIRE(raw.targets != nullptr);
    r.inputs = take(raw.inputs, r.B, r.T);
    int64_t B2 = 0, T2 = 0;
    r.targets = take(raw.targets, B2, T2);
    CHECK(B2 == r.B);
    CHECK(T2 == r.T);
    return r;
  }
  std::vector<Rows> next(int n) {
    std::vector<Rows> out;
    for (int i = 0; i < n; ++i) out.push_back(next());
    return out;
  }

  std::string save() { return loom_test::save_plugin_state(vt_.state_save, handle_); }
  // "" on success, else the error message.
  std::string load(const std::string& state) { return loom_test::load_plugin_state(vt_.state_load, handle_, state); }

 private:
  // Copies an int64 (B, T) CPU DLPack tensor out and calls its deleter.
  static std::vector<int64_t> take(DLManagedTensor* m, int64_t& B, int64_t& T) {
    const DLTensor& t = m->dl_tensor;
    CHECK(t.device.device_type == kDLCPU);
    CHECK(t.dtype.code == kDLInt);
    CHECK(t.dtype.bits == 64);
    REQUIRE(t.ndim == 2);
    CHECK(t.strides == nullptr);
    B = t.shape[0];
    T = t.shape[1];
    const auto* p = reinterpret_cast<const int64_t*>(static_cast<const char*>(t.data) + t.byte_offset);
    std::vector<int64_t> out(p, p + B * T);
    m->deleter(m);
    return out;
  }

  loom_dataset_vtable vt_{};
  loom_config config_;
  std::string slot_, run_dir_, device_;
  loom_dataset* handle_ = nullptr;
};

// Writes a version-1 token file holding `tokens` as token_bytes-wide ids.
inline fs::path write_token_file(const fs::path& path, const std::vector<uint32_t>& tokens, uint32_t token_bytes = 2) {
  loom::data::TokenFileHeader h;
  h.token_bytes = token_bytes;
  h.token_count = tokens.size();
  std::string bytes = loom::data::encode_token_file_header(h);
  for (uint32_t t : tokens)
    for (uint32_t i = 0; i < token_bytes; ++i) bytes.push_back(char((t >> (8 * i)) & 0xFF));
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Tokens 0, 1, ..., n - 1: every window's first input token names its start.
inline std::vector<uint32_t> iota_tokens(uint32_t n) {
  std::vector<uint32_t> out(n);
  for (uint32_t i = 0; i < n; ++i) out[i] = i;
  return out;
}

}  // namespace loom_test
