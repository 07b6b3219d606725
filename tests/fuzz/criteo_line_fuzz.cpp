// criteo_line_fuzz.cpp: the Criteo line parser, plugins/datasets/criteo_tsv/criteo_line.hpp
// parse_line, and the `criteo_tsv` dataset built on it, driven through its C vtable as the host
// drives it (the plugin's sources are compiled into this program; tests/support/standin_host.hpp
// is the host side). Small tables (1, 3 and 7 rows) and at most 4 ids a cell.
//
// The input is used three ways:
//   1. each of its first lines goes to parse_line; a parsed sample must keep its promises
//      (ids within their tables, at most 4 a cell, dense values finite and >= 0);
//   2. it is the one file of a dataset (two configurations: one rank with a window per file; rank
//      1 of 2 with windows of 2 lines); batches must have the documented layout, and a fresh
//      dataset loading the state saved after two results must continue exactly the same;
//   3. it is offered as a saved state to a dataset over a fixed valid file.
// Documented refusals: a DataError from the parser; a status with code INVALID_ARGUMENT from the
// plugin (anything else, such as INTERNAL from an unexpected C++ exception, is a finding).
#include <loom/abi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "plugins/datasets/criteo_tsv/criteo_line.hpp"
#include "plugins/datasets/common/data_error.hpp"
#include "fuzz_support.hpp"
#include "linked_dataset.hpp"

namespace {

constexpr uint64_t kRows[3] = {1, 3, 7};
constexpr int64_t kMaxIds = 4;
constexpr int kMaxDraws = 24;

const loom_dataset_vtable& vtable() {
  static const loom_dataset_vtable vt = loom_fuzz::linked_dataset_vtable("criteo_tsv");
  return vt;
}

// A status the plugin returned: INVALID_ARGUMENT is a documented refusal (true, with its message
// in *message), anything else a finding.
bool refused(loom_status* status, const char* call, std::string* message = nullptr) {
  if (status == nullptr) return false;
  const loom_status_code code = status->code;
  const std::string text = status->message;
  loom_standin::status_destroy(status);
  if (code != LOOM_STATUS_CODE_INVALID_ARGUMENT)
    loom_fuzz::finding(std::string("criteo_tsv ") + call + " returned status code " + std::to_string(int(code)) +
                       " (only INVALID_ARGUMENT is a refusal): " + text);
  if (message) *message = text;
  return true;
}

struct Config {
  const char* batch_size;
  const char* window_rows;
  int32_t rank, world_size;
};

struct Dataset {
  loom_dataset* handle = nullptr;
  int32_t rank = 0;  // rank 0 holds the most lines of every window, so it never pads
  ~Dataset() { vtable().destroy(handle); }
};

bool open(Dataset& d, const std::string& path, const Config& c) {
  loom_config config;
  config.values = {{"files", path},          {"batch_size", c.batch_size}, {"dense_features", "2"},
                   {"sparse_features", "3"}, {"table_rows", "1,3,7"},      {"window_rows", c.window_rows},
                   {"passes", "2"},          {"max_ids_per_feature", "4"}};
  const std::string run_dir = loom_fuzz::scratch_dir().string();
  const loom_context context = {sizeof(loom_context), "data", run_dir.c_str(), 7, c.rank, c.world_size, "cpu", 10};
  d.rank = c.rank;
  return !refused(vtable().create(&context, &config, &d.handle), "create");
}

// A compact CPU tensor's elements of type T, checked against the expected dtype and shape.
template <class T>
std::vector<T> elements(DLManagedTensor* m, uint8_t code, const std::vector<int64_t>& shape, const char* what) {
  if (m == nullptr) loom_fuzz::finding(std::string("criteo_tsv: no ") + what + " tensor");
  const DLTensor& t = m->dl_tensor;
  if (t.dtype.code != code || t.dtype.bits != 8 * sizeof(T) || t.ndim != int32_t(shape.size()) || t.strides)
    loom_fuzz::finding(std::string("criteo_tsv: ") + what + " has the wrong dtype or rank");
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] >= 0 && t.shape[i] != shape[i]) loom_fuzz::finding(std::string("criteo_tsv: ") + what + " has the wrong shape");
  int64_t n = 1;
  for (int32_t i = 0; i < t.ndim; ++i) n *= t.shape[i];
  const T* p = reinterpret_cast<const T*>(static_cast<const char*>(t.data) + t.byte_offset);
  std::vector<T> out(p, p + n);
  m->deleter(m);
  return out;
}

struct Fields {
  std::vector<std::pair<std::string, DLManagedTensor*>> got;
};

template <class T>
void append_bytes(std::string& out, const std::vector<T>& v) {
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Draws one result, checks the batch layout, and returns a signature: "|" window end, "." data
// end, "!" + message for a refusal, else the batch's bytes.
std::string draw(Dataset& d) {
  loom_batch batch{};
  batch.struct_size = sizeof batch;
  Fields fields;
  batch.fields = &fields;
  batch.add_field = [](void* user, const char* name, DLManagedTensor* t) -> loom_status* {
    static_cast<Fields*>(user)->got.emplace_back(name, t);
    return nullptr;
  };
  std::string message;
  if (refused(vtable().next(d.handle, &batch), "next", &message)) {
    for (auto& f : fields.got) f.second->deleter(f.second);
    return "!" + message;
  }
  if (batch.end_of_data || batch.end_of_epoch) {
    if (batch.inputs || batch.targets || !fields.got.empty()) loom_fuzz::finding("criteo_tsv: an end carried tensors");
    return batch.end_of_data ? "." : "|";
  }
  if (fields.got.size() != 3 || fields.got[0].first != "dense_features" || fields.got[1].first != "sparse_ids_values" ||
      fields.got[2].first != "sparse_ids_offsets")
    loom_fuzz::finding("criteo_tsv: a batch without its three fields");
  const int64_t B = batch.inputs ? batch.inputs->dl_tensor.shape[0] : 0;
  if (B < 1 && d.rank == 0) loom_fuzz::finding("criteo_tsv: an empty batch on rank 0");
  const auto inputs = elements<int64_t>(batch.inputs, kDLInt, {B, 1}, "inputs");
  const auto targets = elements<int64_t>(batch.targets, kDLInt, {B, 1}, "targets");
  const auto dense = elements<float>(fields.got[0].second, kDLFloat, {B, 2}, "dense_features");
  const auto values = elements<int64_t>(fields.got[1].second, kDLInt, {-1}, "sparse_ids_values");
  const auto offsets = elements<int64_t>(fields.got[2].second, kDLInt, {3 * B + 1}, "sparse_ids_offsets");
  for (int64_t y : targets)
    if (y != 0 && y != 1) loom_fuzz::finding("criteo_tsv: a label other than 0 or 1");
  for (float x : dense)
    if (!std::isfinite(x) || x < 0) loom_fuzz::finding("criteo_tsv: a dense value that log(1 + x) cannot give");
  if (offsets[0] != 0 || offsets.back() != int64_t(values.size()))
    loom_fuzz::finding("criteo_tsv: offsets do not span the values");
  for (int64_t f = 0; f < 3; ++f)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t lo = offsets[size_t(f * B + b)], hi = offsets[size_t(f * B + b + 1)];
      if (hi < lo || hi - lo > kMaxIds) loom_fuzz::finding("criteo_tsv: a cell's offsets are out of order or too many");
      for (int64_t i = lo; i < hi; ++i)
        if (values[size_t(i)] < 0 || uint64_t(values[size_t(i)]) >= kRows[f])
          loom_fuzz::finding("criteo_tsv: a hashed row outside its table");
    }
  std::string sig;
  for (const auto* v : {&inputs, &targets, &values, &offsets}) append_bytes(sig, *v);
  append_bytes(sig, dense);
  return sig;
}

std::string save(Dataset& d) {
  std::string state;
  const loom_byte_writer writer = {sizeof(loom_byte_writer), &state, [](void* user, const void* p, size_t n) {
                                     static_cast<std::string*>(user)->append(static_cast<const char*>(p), n);
                                     return static_cast<loom_status*>(nullptr);
                                   }};
  if (refused(vtable().state_save(d.handle, &writer), "state_save")) loom_fuzz::finding("state_save refused");
  return state;
}

// Draws until the data ends, a refusal or kMaxDraws; a fresh dataset resumed from the state saved
// after two results must draw the same.
void exercise(const std::string& path, const Config& c) {
  Dataset d;
  if (!open(d, path, c)) return;
  std::vector<std::string> first;
  std::string state;
  for (int i = 0; i < kMaxDraws; ++i) {
    if (i == 2) state = save(d);
    first.push_back(draw(d));
    if (first.back() == "." || first.back()[0] == '!') break;
  }
  if (first.size() <= 2) return;
  Dataset again;
  if (!open(again, path, c)) loom_fuzz::finding("criteo_tsv refused a file it opened a moment ago");
  if (refused(vtable().state_load(again.handle, state.data(), state.size()), "state_load"))
    loom_fuzz::finding("criteo_tsv refused the state it saved itself");
  for (size_t i = 2; i < first.size(); ++i)
    if (draw(again) != first[i]) loom_fuzz::finding("criteo_tsv resumed from its own state drew a different result");
}

// The valid file the state records of make-corpus refer to (tests/fuzz/make-corpus writes the
// same lines): 5 lines, 2 dense and 3 categorical features.
const std::string& valid_file() {
  static const std::string path = [] {
    const std::string lines = "1\t3\t\ta\t1,2\t\n0\t\t-1\tff\t\tdeadbeef\n1\t0\t7\t\t3\t9\n0\t1\t1\t1\t1\t1\n1\t\t\t\t\t\n";
    const auto p = loom_fuzz::scratch_dir() / "valid.tsv";
    loom_fuzz::write_file(p, lines.data(), lines.size());
    return p.string();
  }();
  return path;
}

void parse_lines(std::string_view text) {
  loom::criteo::LineFormat format;
  format.dense = 2;
  format.sparse = 3;
  format.table_rows.assign(kRows, kRows + 3);
  format.max_ids_per_feature = kMaxIds;
  loom::criteo::Sample s;
  for (int n = 1; n <= 8 && !text.empty(); ++n) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    loom_fuzz::expect_only<loom::data::DataError>("parse_line", [&] {
      loom::criteo::parse_line(line, format, "input.tsv", uint64_t(n), s);
      if (s.label != 0 && s.label != 1) loom_fuzz::finding("parse_line gave a label other than 0 or 1");
      if (s.dense.size() != 2 || s.id_ends.size() != 3 || s.id_ends[2] != int64_t(s.ids.size()))
        loom_fuzz::finding("parse_line gave a sample of the wrong shape");
      int64_t begin = 0;
      for (size_t f = 0; f < 3; ++f) {
        if (s.id_ends[f] < begin || s.id_ends[f] - begin > kMaxIds) loom_fuzz::finding("parse_line: bad id_ends");
        for (int64_t i = begin; i < s.id_ends[f]; ++i)
          if (s.ids[size_t(i)] < 0 || uint64_t(s.ids[size_t(i)]) >= kRows[f])
            loom_fuzz::finding("parse_line: a hashed row outside its table");
        begin = s.id_ends[f];
      }
    });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  parse_lines(text);

  const std::string path = (loom_fuzz::scratch_dir() / "input.tsv").string();
  loom_fuzz::write_file(path, data, size);
  exercise(path, {"3", "0", 0, 1});
  exercise(path, {"2", "2", 1, 2});

  // The input as a saved state (a checkpoint from elsewhere), for a dataset over the valid file.
  Dataset d;
  if (!open(d, valid_file(), {"3", "2", 0, 1})) loom_fuzz::finding("the valid file was refused");
  if (!refused(vtable().state_load(d.handle, data, size), "state_load"))
    for (int i = 0; i < 4; ++i) loom_fuzz::keep(draw(d).size());
  return 0;
}
