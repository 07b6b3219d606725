#include "safetensors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "format_error.hpp"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors tensors are little-endian and are read and written as they lie in memory"
#endif

namespace loom::formats {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference reader's limit
constexpr const char* kMetadataKey = "__metadata__";

// Every safetensors dtype that DLPack 0.6 (Debian's libdlpack-dev) can describe.
constexpr DType kDTypes[] = {
    {"F64", {kDLFloat, 64, 1}, 8},  {"F32", {kDLFloat, 32, 1}, 4}, {"F16", {kDLFloat, 16, 1}, 2},
    {"BF16", {kDLBfloat, 16, 1}, 2}, {"I64", {kDLInt, 64, 1}, 8},   {"I32", {kDLInt, 32, 1}, 4},
    {"I16", {kDLInt, 16, 1}, 2},    {"I8", {kDLInt, 8, 1}, 1},     {"U64", {kDLUInt, 64, 1}, 8},
    {"U32", {kDLUInt, 32, 1}, 4},   {"U16", {kDLUInt, 16, 1}, 2},  {"U8", {kDLUInt, 8, 1}, 1},
};

// Throws the one message every header problem shares.
class HeaderError {
 public:
  explicit HeaderError(std::string path) : path_(std::move(path)) {}
  [[noreturn]] void operator()(const std::string& what) const {
    invalid("'" + path_ + "' is not a valid safetensors file: " + what);
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

TensorEntry parse_entry(const std::string& name, const nlohmann::json& v, const HeaderError& bad) {
  const std::string who = "tensor '" + name + "'";
  if (!v.is_object()) bad(who + " is not a JSON object");
  TensorEntry e;
  e.name = name;
  const auto dtype = v.find("dtype");
  if (dtype == v.end() || !dtype->is_string()) bad(who + " has no \"dtype\" string");
  e.dtype = dtype_named(dtype->get<std::string>());
  if (e.dtype == nullptr)
    bad(who + " has dtype \"" + dtype->get<std::string>() + "\", which Loom cannot read (it reads " + dtype_list() +
        ")");
  const auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array()) bad(who + " has no \"shape\" array");
  if (shape->size() > 64) bad(who + " has " + std::to_string(shape->size()) + " dimensions (at most 64)");
  for (const auto& d : *shape) {
    uint64_t n = 0;
    if (!as_u64(d, &n) || n > uint64_t(INT64_MAX)) bad(who + " has a shape entry that is not a non-negative integer");
    e.shape.push_back(int64_t(n));
  }
  const auto offsets = v.find("data_offsets");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2 || !as_u64((*offsets)[0], &e.begin) ||
      !as_u64((*offsets)[1], &e.end) || e.begin > e.end)
    bad(who + " has no \"data_offsets\" pair [begin, end] with begin <= end");
  uint64_t bytes = 0;
  if (!tensor_bytes(e.shape, e.dtype->bytes, &bytes)) bad(who + "'s shape overflows");
  if (e.end - e.begin != bytes)
    bad(who + " spans " + std::to_string(e.end - e.begin) + " bytes but its shape and dtype need " +
        std::to_string(bytes));
  return e;
}

// The header bytes: compact JSON padded with spaces to a multiple of 8.
std::string encode_header(const std::vector<OutgoingTensor>& tensors, const std::vector<uint64_t>& offsets,
                          const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  for (size_t i = 0; i < tensors.size(); ++i)
    header[tensors[i].name] = {{"dtype", tensors[i].dtype->name},
                               {"shape", tensors[i].shape},
                               {"data_offsets", {offsets[i], offsets[i + 1]}}};
  std::string text;
  try {
    text = header.dump();  // throws on invalid UTF-8
  } catch (const nlohmann::json::exception& e) {
    invalid(std::string("tensor names and metadata must be valid UTF-8: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

const DType* dtype_named(const std::string& name) {
  for (const DType& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

const DType* dtype_of(DLDataType t) {
  for (const DType& d : kDTypes)
    if (d.dl.code == t.code && d.dl.bits == t.bits && d.dl.lanes == t.lanes) return &d;
  return nullptr;
}

std::string dtype_list() {
  std::string out;
  for (const DType& d : kDTypes) out += std::string(out.empty() ? "" : ", ") + d.name;
  return out;
}

bool tensor_bytes(const std::vector<int64_t>& shape, uint64_t element_bytes, uint64_t* out) {
  uint64_t n = element_bytes;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, uint64_t(d), &n)) return false;
  *out = n;
  return true;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  const HeaderError bad(path);
  const uint64_t size = file_.size();
  if (size < 8) bad("the file is " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file_.data()[i];  // little-endian
  if (n > size - 8)
    bad("the header length field says " + std::to_string(n) + " bytes but only " + std::to_string(size - 8) +
        " follow it (the file is truncated)");
  if (n > kMaxHeaderBytes) bad("the header length " + std::to_string(n) + " exceeds the format's 100 MB limit");
  if (n == 0) bad("the header is empty");
  if (file_.data()[8] != '{') bad("the header does not start with '{'");
  const char* header = reinterpret_cast<const char*>(file_.data() + 8);
  const nlohmann::json json = nlohmann::json::parse(header, header + n, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) bad("the " + std::to_string(n) + "-byte header is not valid JSON");
  if (!json.is_object()) bad("the header is not a JSON object");

  for (const auto& [key, value] : json.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) bad("__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) bad("__metadata__[\"" + k + "\"] is not a string");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    tensors_.push_back(parse_entry(key, value, bad));
  }
  // The offsets must tile the byte buffer exactly: sorted, each starting where the last ended.
  std::sort(tensors_.begin(), tensors_.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const uint64_t buffer = size - 8 - n;
  uint64_t at = 0;
  for (const TensorEntry& e : tensors_) {
    if (e.begin < at) bad("tensor '" + e.name + "' overlaps the tensor before it");
    if (e.begin > at) bad("there is a hole of " + std::to_string(e.begin - at) + " bytes before tensor '" + e.name + "'");
    if (e.end > buffer)
      bad("tensor '" + e.name + "' ends at byte " + std::to_string(e.end) + " of a " + std::to_string(buffer) +
          "-byte data section (the file is truncated)");
    at = e.end;
  }
  if (at != buffer) bad(std::to_string(buffer - at) + " bytes at the end of the file belong to no tensor");
  data_start_ = 8 + n;
  for (size_t i = 0; i < tensors_.size(); ++i) by_name_[tensors_[i].name] = i;
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

void write_safetensors(const std::string& path, std::vector<OutgoingTensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  for (const OutgoingTensor& t : tensors) {
    if (t.name.empty()) invalid("a tensor to write has an empty name");
    if (t.name == kMetadataKey) invalid("a tensor may not be named __metadata__ (the format reserves it)");
    if (t.dtype == nullptr) invalid("tensor '" + t.name + "' has no safetensors dtype");
    if (!names.insert(t.name).second) invalid("two tensors are named '" + t.name + "'");
  }
  // Largest elements first: with an 8-byte aligned buffer every tensor starts aligned.
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const OutgoingTensor& a, const OutgoingTensor& b) { return a.dtype->bytes > b.dtype->bytes; });
  std::vector<uint64_t> offsets{0};
  for (const OutgoingTensor& t : tensors) {
    uint64_t bytes = 0;
    if (!tensor_bytes(t.shape, t.dtype->bytes, &bytes)) invalid("tensor '" + t.name + "' has a bad shape");
    if (bytes > 0 && t.data == nullptr) invalid("tensor '" + t.name + "' has no data");
    offsets.push_back(offsets.back() + bytes);
  }
  const std::string header = encode_header(tensors, offsets, metadata);
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>((uint64_t(header.size()) >> (8 * i)) & 0xFF);

  OutputFile file(path);
  file.write(prefix, sizeof prefix);
  file.write(header.data(), header.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    if (offsets[i + 1] > offsets[i]) file.write(tensors[i].data, offsets[i + 1] - offsets[i]);
  file.commit();
}

}  // namespace loom::formats
