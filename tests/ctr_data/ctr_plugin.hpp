// ctr_plugin.hpp: the real criteo_tsv plugin, loaded as the host loads it (the kernel's
// registry, options resolved against its declaration, one loom_context per rank), driven through
// its C vtable. Each next() is copied into plain vectors: inputs, targets and the three named
// fields, or the epoch (window) end or data end it reported.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "abi/host_api.hpp"
#include "plugin_slots.hpp"
#include "plugin_state.hpp"

namespace ctr_test {

namespace fs = std::filesystem;

struct CtrBatch {
  enum Kind { batch, window_end, data_end } kind = batch;
  int64_t B = 0;
  std::vector<int64_t> inputs, targets;  // [B, 1]
  std::vector<float> dense;               // [B, dense]
  std::vector<int64_t> dense_shape, values, offsets;
  bool operator==(const CtrBatch& o) const {
    return kind == o.kind && B == o.B && inputs == o.inputs && targets == o.targets && dense == o.dense &&
           dense_shape == o.dense_shape && values == o.values && offsets == o.offsets;
  }
};

inline std::ostream& operator<<(std::ostream& out, const CtrBatch& b) {
  const char* kinds[] = {"batch", "window_end", "data_end"};
  out << kinds[b.kind] << "(B=" << b.B << ", inputs =";
  for (int64_t v : b.inputs) out << " " << v;
  return out << ")";
}

struct CreateError : std::runtime_error {
  loom_status_code code;
  CreateError(loom_status_code c, const std::string& m) : std::runtime_error(m), code(c) {}
};

class CtrDataset {
 public:
  explicit CtrDataset(const toml::table& options, int32_t rank = 0, int32_t world_size = 1) {
    const loom::SlotConfig slot = loom_test::plugin_slot(LOOM_KIND_DATASET, "data", "criteo_tsv", options);
    vt_ = loom::copy_vtable<loom_dataset_vtable>(slot.component->vtable);
    config_ = slot.config;
    run_dir_ = (fs::path(LOOM_TEST_TMP) / "ctr-run").string();
    const loom_context context = {sizeof(loom_context), "data", run_dir_.c_str(), 0, rank, world_size, "cpu", 100};
    if (loom_status* s = vt_.create(&context, &config_, &handle_)) {
      const loom_status_code code = loom::host_api()->status_get_code(s);
      throw CreateError(code, loom::take_status_message(s));
    }
  }
  ~CtrDataset() { vt_.destroy(handle_); }
  CtrDataset(const CtrDataset&) = delete;
  CtrDataset& operator=(const CtrDataset&) = delete;

  // The next batch or end; "" in error, else next's failure message.
  CtrBatch next(std::string* error = nullptr) {
    loom_batch raw{};
    raw.struct_size = sizeof raw;
    CtrBatch out;
    raw.fields = &out;
    raw.add_field = [](void* user, const char* name, DLManagedTensor* t) -> loom_status* {
      auto& b = *static_cast<CtrBatch*>(user);
      const std::string n = name;
      if (n == "dense_features") b.dense = take<float>(t, kDLFloat, 2, &b.dense_shape);
      else if (n == "sparse_ids_values") b.values = take<int64_t>(t, kDLInt, 1);
      else if (n == "sparse_ids_offsets") b.offsets = take<int64_t>(t, kDLInt, 1);
      else FAIL("unexpected field " << n);
      return nullptr;
    };
    if (loom_status* s = vt_.next(handle_, &raw)) {
      const std::string message = loom::take_status_message(s);
      if (error == nullptr) FAIL("next failed: " << message);
      *error = message;
      return out;
    }
    if (raw.end_of_data || raw.end_of_epoch) {
      CHECK(raw.inputs == nullptr);
      out.kind = raw.end_of_data ? CtrBatch::data_end : CtrBatch::window_end;
      return out;
    }
    std::vector<int64_t> shape;
    out.inputs = take<int64_t>(raw.inputs, kDLInt, 2, &shape);
    out.B = shape[0];
    CHECK(shape[1] == 1);
    out.targets = take<int64_t>(raw.targets, kDLInt, 2, &shape);
    CHECK(shape == std::vector<int64_t>{out.B, 1});
    return out;
  }

  std::string save() { return loom_test::save_plugin_state(vt_.state_save, handle_); }
  std::string load(const std::string& state) { return loom_test::load_plugin_state(vt_.state_load, handle_, state); }
  int64_t batches_per_epoch() {
    REQUIRE(bool(vt_.info));
    loom_dataset_info_args args{sizeof args, -1};
    REQUIRE(vt_.info(handle_, &args) == nullptr);
    return args.batches_per_epoch;
  }

 private:
  // Copies a compact CPU tensor of the given element type and rank out, then frees it.
  template <class T>
  static std::vector<T> take(DLManagedTensor* m, uint8_t code, int32_t ndim, std::vector<int64_t>* shape = nullptr) {
    REQUIRE(m != nullptr);
    const DLTensor& t = m->dl_tensor;
    CHECK(t.device.device_type == kDLCPU);
    CHECK(t.dtype.code == code);
    CHECK(t.dtype.bits == 8 * sizeof(T));
    REQUIRE(t.ndim == ndim);
    CHECK(t.strides == nullptr);
    int64_t n = 1;
    for (int32_t i = 0; i < t.ndim; ++i) n *= t.shape[i];
    if (shape) shape->assign(t.shape, t.shape + t.ndim);
    const auto* p = reinterpret_cast<const T*>(static_cast<const char*>(t.data) + t.byte_offset);
    std::vector<T> out(p, p + n);
    m->deleter(m);
    return out;
  }

  loom_dataset_vtable vt_{};
  loom_config config_;
  std::string run_dir_;
  loom_dataset* handle_ = nullptr;
};

}  // namespace ctr_test
