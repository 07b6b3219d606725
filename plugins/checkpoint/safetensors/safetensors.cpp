// safetensors.cpp: the `safetensors` checkpoint backend (torch-free, the default). It writes
// every tensor into one file in the public safetensors format, readable by Python's
// `safetensors` package and by Hugging Face loaders, and keeps the manager's metadata JSON in
// the header's __metadata__ map.
//
// The format, as published in the README of https://github.com/huggingface/safetensors
// ("Format") and enforced by its Rust reader (safetensors/src/tensor.rs):
//   - 8 bytes: N, an unsigned little-endian 64-bit integer, the size of the header;
//   - N bytes: a UTF-8 JSON object, the header. It starts with '{' and may be padded at the end
//     with spaces (0x20). Each key is a tensor name mapping to
//       {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}
//     with offsets relative to the first byte after the header, END one past the last byte.
//     The optional key "__metadata__" maps to a string-to-string object. Keys are unique.
//     Readers refuse headers over 100 MB;
//   - the rest of the file: the byte buffer. Tensors are little-endian, C order (row-major),
//     packed (no strides). The offsets must cover the buffer exactly: no holes, no overlap.
//     0-d tensors (shape []) and empty tensors (a 0 dimension, BEGIN == END) are allowed.
//
// What this backend adds on top (all still plain safetensors):
//   - __metadata__ = {"format": "pt", "loom": "<the manager's metadata JSON, as a string>"};
//     "format": "pt" is what Hugging Face transformers expects in a PyTorch checkpoint;
//   - the header is padded with spaces to a multiple of 8 bytes, and tensors are stored in
//     order of decreasing element size (stable), so every tensor starts naturally aligned in
//     the file and in a memory map of it, as the reference writer does;
//   - load validates the whole header (sizes, JSON, dtypes, shapes, offsets) before it hands
//     out a single tensor, so a truncated or corrupted file is one clear error.
#include <loom/checkpoint.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "checkpoint_files.hpp"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the safetensors backend writes tensors as they lie in memory, which must be little-endian"
#endif

namespace {

using loom::Error;
using ordered_json = nlohmann::ordered_json;

constexpr const char* kBackend = "safetensors";
constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference reader's limit
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kLoomKey = "loom";

struct DType {
  const char* name;  // as the header spells it
  DLDataType dl;
  uint64_t bytes;    // per element
};

// Every safetensors dtype that DLPack 0.6 (Debian's libdlpack-dev) can describe.
constexpr DType kDTypes[] = {
    {"F64", {kDLFloat, 64, 1}, 8},  {"F32", {kDLFloat, 32, 1}, 4}, {"F16", {kDLFloat, 16, 1}, 2},
    {"BF16", {kDLBfloat, 16, 1}, 2}, {"I64", {kDLInt, 64, 1}, 8},   {"I32", {kDLInt, 32, 1}, 4},
    {"I16", {kDLInt, 16, 1}, 2},    {"I8", {kDLInt, 8, 1}, 1},     {"U64", {kDLUInt, 64, 1}, 8},
    {"U32", {kDLUInt, 32, 1}, 4},   {"U16", {kDLUInt, 16, 1}, 2},  {"U8", {kDLUInt, 8, 1}, 1},
};

const DType* dtype_of(DLDataType t) {
  for (const DType& d : kDTypes)
    if (d.dl.code == t.code && d.dl.bits == t.bits && d.dl.lanes == t.lanes) return &d;
  return nullptr;
}
const DType* dtype_named(const std::string& name) {
  for (const DType& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}
std::string dtype_list() {
  std::string out;
  for (const DType& d : kDTypes) out += std::string(out.empty() ? "" : ", ") + d.name;
  return out;
}

// elements * bytes, or false on overflow.
bool byte_size(const std::vector<int64_t>& shape, uint64_t element_bytes, uint64_t* out) {
  uint64_t n = element_bytes;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, uint64_t(d), &n)) return false;
  *out = n;
  return true;
}

// One tensor as the header describes it.
struct Entry {
  std::string name;
  const DType* dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to the byte buffer
};

// ---- save ------------------------------------------------------------------------------

struct Outgoing {
  Entry entry;
  const void* data = nullptr;  // borrowed for the save call
};

Outgoing describe(const loom::NamedTensor& t) {
  const std::string name = t.name;
  const DLTensor& dl = *t.tensor;
  if (name.empty()) throw Error("safetensors: a tensor has an empty name");
  if (name == kMetadataKey) throw Error("safetensors: a tensor may not be named __metadata__ (reserved by the format)");
  if (dl.device.device_type != kDLCPU)
    throw Error("safetensors: tensor '" + name + "' is not on the CPU; the host copies tensors to the CPU before saving",
                LOOM_STATUS_CODE_INTERNAL);
  Outgoing out;
  out.entry.name = name;
  out.entry.dtype = dtype_of(dl.dtype);
  if (out.entry.dtype == nullptr)
    throw Error("safetensors: tensor '" + name + "' has a dtype (DLPack code " + std::to_string(dl.dtype.code) +
                ", " + std::to_string(dl.dtype.bits) + " bits, " + std::to_string(dl.dtype.lanes) +
                " lanes) the format cannot store; supported: " + dtype_list());
  if (dl.ndim < 0 || (dl.ndim > 0 && dl.shape == nullptr))
    throw Error("safetensors: tensor '" + name + "' has no valid shape", LOOM_STATUS_CODE_INTERNAL);
  out.entry.shape.assign(dl.shape, dl.shape + dl.ndim);
  if (dl.strides != nullptr) {  // explicit strides are fine when they describe row-major order
    int64_t expected = 1;
    for (int i = dl.ndim - 1; i >= 0; --i) {
      if (dl.shape[i] != 1 && dl.strides[i] != expected)
        throw Error("safetensors: tensor '" + name + "' is not contiguous row-major", LOOM_STATUS_CODE_INTERNAL);
      expected *= dl.shape[i];
    }
  }
  uint64_t bytes = 0;
  if (!byte_size(out.entry.shape, out.entry.dtype->bytes, &bytes))
    throw Error("safetensors: tensor '" + name + "' has a negative or overflowing shape", LOOM_STATUS_CODE_INTERNAL);
  if (bytes > 0 && dl.data == nullptr)
    throw Error("safetensors: tensor '" + name + "' has no data", LOOM_STATUS_CODE_INTERNAL);
  out.entry.end = bytes;  // begin is assigned once the order is known
  out.data = bytes > 0 ? static_cast<const char*>(dl.data) + dl.byte_offset : nullptr;
  return out;
}

// The header bytes: JSON padded with spaces to a multiple of 8.
std::string encode_header(const std::vector<Outgoing>& tensors, const std::string& metadata_json) {
  ordered_json header = ordered_json::object();
  header[kMetadataKey] = {{"format", "pt"}, {kLoomKey, metadata_json}};
  for (const Outgoing& t : tensors)
    header[t.entry.name] = {{"dtype", t.entry.dtype->name},
                            {"shape", t.entry.shape},
                            {"data_offsets", {t.entry.begin, t.entry.end}}};
  std::string text;
  try {
    text = header.dump();  // compact; throws on invalid UTF-8
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("safetensors: tensor names and metadata must be valid UTF-8: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

// ---- load ------------------------------------------------------------------------------

class HeaderError {
 public:
  explicit HeaderError(std::string path) : path_(std::move(path)) {}
  [[noreturn]] void operator()(const std::string& what) const {
    throw Error("safetensors: '" + path_ + "' is not a valid safetensors file: " + what +
                    "; the checkpoint is corrupt or truncated (resume from an older one)",
                LOOM_STATUS_CODE_INVALID_ARGUMENT);
  }

 private:
  std::string path_;
};

// Header integers are non-negative JSON integers.
bool as_u64(const nlohmann::json& v, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;
  *out = v.get<uint64_t>();
  return true;
}

Entry parse_entry(const std::string& name, const nlohmann::json& v, const HeaderError& bad) {
  const std::string who = "tensor '" + name + "'";
  if (!v.is_object()) bad(who + " is not a JSON object");
  Entry e;
  e.name = name;
  const auto dtype = v.find("dtype");
  if (dtype == v.end() || !dtype->is_string()) bad(who + " has no \"dtype\" string");
  e.dtype = dtype_named(dtype->get<std::string>());
  if (e.dtype == nullptr)
    bad(who + " has dtype \"" + dtype->get<std::string>() + "\", which this backend cannot load (it loads " +
        dtype_list() + ")");
  const auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array()) bad(who + " has no \"shape\" array");
  for (const auto& d : *shape) {
    uint64_t n = 0;
    if (!as_u64(d, &n) || n > uint64_t(INT64_MAX)) bad(who + " has a shape entry that is not a non-negative integer");
    e.shape.push_back(int64_t(n));
  }
  if (e.shape.size() > size_t(INT32_MAX)) bad(who + " has too many dimensions");
  const auto offsets = v.find("data_offsets");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2 || !as_u64((*offsets)[0], &e.begin) ||
      !as_u64((*offsets)[1], &e.end) || e.begin > e.end)
    bad(who + " has no \"data_offsets\" pair [begin, end] with begin <= end");
  uint64_t bytes = 0;
  if (!byte_size(e.shape, e.dtype->bytes, &bytes)) bad(who + "'s shape overflows");
  if (e.end - e.begin != bytes)
    bad(who + " spans " + std::to_string(e.end - e.begin) + " bytes but its shape and dtype need " +
        std::to_string(bytes));
  return e;
}

// Validates everything; returns the tensors in file order and the metadata (if any).
std::vector<Entry> parse_file(const loom::ckpt::MappedInput& file, const std::string& path, uint64_t* data_start,
                              bool* has_metadata, std::string* metadata) {
  const HeaderError bad(path);
  const uint64_t size = file.size();
  if (size < 8) bad("the file is " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file.data()[i];  // little-endian
  if (n > size - 8)
    bad("the header length field says " + std::to_string(n) + " bytes but only " + std::to_string(size - 8) +
        " follow it");
  if (n > kMaxHeaderBytes) bad("the header length " + std::to_string(n) + " exceeds the format's 100 MB limit");
  if (n == 0) bad("the header is empty");
  if (file.data()[8] != '{') bad("the header does not start with '{'");
  const char* header = reinterpret_cast<const char*>(file.data() + 8);
  const nlohmann::json json = nlohmann::json::parse(header, header + n, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) bad("the " + std::to_string(n) + "-byte header is not valid JSON");
  if (!json.is_object()) bad("the header is not a JSON object");

  std::vector<Entry> entries;
  *has_metadata = false;
  for (const auto& [key, value] : json.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) bad("__metadata__ is not an object");
      for (const auto& [k, v] : value.items())
        if (!v.is_string()) bad("__metadata__[\"" + k + "\"] is not a string");
      const auto loom_meta = value.find(kLoomKey);
      if (loom_meta != value.end()) {
        *has_metadata = true;
        *metadata = loom_meta->get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(key, value, bad));
  }
  // The offsets must tile the byte buffer exactly: sorted, each starting where the last ended.
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  const uint64_t buffer = size - 8 - n;
  uint64_t at = 0;
  for (const Entry& e : entries) {
    if (e.begin < at) bad("tensor '" + e.name + "' overlaps the tensor before it");
    if (e.begin > at) bad("there is a hole of " + std::to_string(e.begin - at) + " bytes before tensor '" + e.name + "'");
    if (e.end > buffer)
      bad("tensor '" + e.name + "' ends at byte " + std::to_string(e.end) + " of a " + std::to_string(buffer) +
          "-byte data section (the file is truncated)");
    at = e.end;
  }
  if (at != buffer)
    bad(std::to_string(buffer - at) + " bytes at the end of the file belong to no tensor");
  *data_start = 8 + n;
  return entries;
}

// ---- the component ---------------------------------------------------------------------

class Safetensors final : public loom::CheckpointBackend {
 public:
  static constexpr const char* name = "safetensors";
  static constexpr const char* summary =
      "Checkpoints as one safetensors file (Python `safetensors` and Hugging Face can read it).";
  static constexpr loom_option_spec options[] = {
      loom::option("file", LOOM_OPTION_TYPE_STRING, "state.safetensors",
                   "File name inside each checkpoint directory."),
  };

  Safetensors(const loom::Config& c, const loom::Context&) : file_(loom::ckpt::file_name_option(c, "file", kBackend)) {}

  void save(const std::string& dir, const std::vector<NamedTensor>& tensors, const std::string& metadata_json) override {
    std::vector<Outgoing> out;
    out.reserve(tensors.size());
    std::set<std::string> names;
    for (const NamedTensor& t : tensors) {
      out.push_back(describe(t));
      if (!names.insert(out.back().entry.name).second)
        throw Error("safetensors: two tensors are named '" + out.back().entry.name + "'", LOOM_STATUS_CODE_INTERNAL);
    }
    // Largest elements first: with an 8-byte aligned buffer every tensor starts aligned.
    std::stable_sort(out.begin(), out.end(),
                     [](const Outgoing& a, const Outgoing& b) { return a.entry.dtype->bytes > b.entry.dtype->bytes; });
    uint64_t at = 0;
    for (Outgoing& t : out) {
      const uint64_t bytes = t.entry.end;
      t.entry.begin = at;
      t.entry.end = at + bytes;
      at = t.entry.end;
    }
    const std::string header = encode_header(out, metadata_json);
    std::string prefix(8, '\0');
    for (int i = 0; i < 8; ++i) prefix[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xFF);

    loom::ckpt::OutputFile file(kBackend, loom::ckpt::join_path(dir, file_));
    const std::string head = prefix + header;
    file.write(head.data(), head.size());
    for (const Outgoing& t : out)
      if (t.entry.end > t.entry.begin) file.write(t.data, t.entry.end - t.entry.begin);
    file.commit();
  }

  void load(const std::string& dir, Reader& reader) override {
    const std::string path = loom::ckpt::join_path(dir, file_);
    const loom::ckpt::MappedInput file(kBackend, path);
    uint64_t data_start = 0;
    bool has_metadata = false;
    std::string metadata;
    const std::vector<Entry> entries = parse_file(file, path, &data_start, &has_metadata, &metadata);
    for (const Entry& e : entries) {
      DLTensor t{};
      t.data = const_cast<unsigned char*>(file.data() + data_start + e.begin);  // borrowed for the call
      t.device = {kDLCPU, 0};
      t.ndim = int32_t(e.shape.size());
      t.dtype = e.dtype->dl;
      t.shape = const_cast<int64_t*>(e.shape.data());
      t.strides = nullptr;  // compact row-major
      t.byte_offset = 0;
      reader.tensor(e.name, t);
    }
    if (has_metadata) reader.metadata(metadata);
  }

 private:
  std::string file_;
};

}  // namespace

LOOM_PLUGIN("safetensors", "0.1.0", loom::component<Safetensors>())
