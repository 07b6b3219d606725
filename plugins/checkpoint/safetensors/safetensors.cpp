// safetensors.cpp: the `safetensors` checkpoint backend (torch-free, the default). It writes
// every tensor into one file in the public safetensors format (formats/safetensors.hpp has the
// format and the reader and writer this backend shares with Hugging Face import and export),
// readable by Python's `safetensors` package and by Hugging Face loaders, and keeps the
// manager's metadata JSON in the header's __metadata__ map:
//   __metadata__ = {"format": "pt", "loom": "<the manager's metadata JSON, as a string>"};
// "format": "pt" is what Hugging Face transformers expects in a PyTorch checkpoint. Load
// validates the whole header (sizes, JSON, dtypes, shapes, offsets) before it hands out a
// single tensor, so a truncated or corrupted file is one clear error.
#include <loom/checkpoint.hpp>

#include <string>
#include <vector>

#include "plugins/checkpoint/common/checkpoint_files.hpp"
#include "formats/format_error.hpp"
#include "formats/safetensors.hpp"

namespace {

using loom::Error;
namespace fmt = loom::formats;

constexpr const char* kBackend = "safetensors";
constexpr const char* kLoomKey = "loom";

// The backend's view of one tensor the manager hands over: checked, then borrowed for save.
fmt::OutgoingTensor describe(const loom::NamedTensor& t) {
  const std::string name = t.name;
  const DLTensor& dl = *t.tensor;
  if (name.empty()) throw Error("safetensors: a tensor has an empty name");
  if (name == "__metadata__") throw Error("safetensors: a tensor may not be named __metadata__ (reserved by the format)");
  if (dl.device.device_type != kDLCPU)
    throw Error("safetensors: tensor '" + name + "' is not on the CPU; the host copies tensors to the CPU before saving",
                LOOM_STATUS_CODE_INTERNAL);
  fmt::OutgoingTensor out;
  out.name = name;
  out.dtype = fmt::dtype_of(dl.dtype);
  if (out.dtype == nullptr)
    throw Error("safetensors: tensor '" + name + "' has a dtype (DLPack code " + std::to_string(dl.dtype.code) +
                ", " + std::to_string(dl.dtype.bits) + " bits, " + std::to_string(dl.dtype.lanes) +
                " lanes) the format cannot store; supported: " + fmt::dtype_list());
  if (dl.ndim < 0 || (dl.ndim > 0 && dl.shape == nullptr))
    throw Error("safetensors: tensor '" + name + "' has no valid shape", LOOM_STATUS_CODE_INTERNAL);
  out.shape.assign(dl.shape, dl.shape + dl.ndim);
  if (dl.strides != nullptr) {  // explicit strides are fine when they describe row-major order
    int64_t expected = 1;
    for (int i = dl.ndim - 1; i >= 0; --i) {
      if (dl.shape[i] != 1 && dl.strides[i] != expected)
        throw Error("safetensors: tensor '" + name + "' is not contiguous row-major", LOOM_STATUS_CODE_INTERNAL);
      expected *= dl.shape[i];
    }
  }
  uint64_t bytes = 0;
  if (!fmt::tensor_bytes(out.shape, out.dtype->bytes, &bytes))
    throw Error("safetensors: tensor '" + name + "' has a negative or overflowing shape", LOOM_STATUS_CODE_INTERNAL);
  if (bytes > 0 && dl.data == nullptr)
    throw Error("safetensors: tensor '" + name + "' has no data", LOOM_STATUS_CODE_INTERNAL);
  out.data = bytes > 0 ? static_cast<const char*>(dl.data) + dl.byte_offset : nullptr;
  return out;
}

// A format error as the manager expects it: a bad file is INVALID_ARGUMENT with the hint to
// resume from an older checkpoint; an I/O failure is INTERNAL.
[[noreturn]] void rethrow(const fmt::FormatError& e, bool loading) {
  if (e.kind() == fmt::FormatError::Kind::invalid)
    throw Error(std::string("safetensors: ") + e.what() +
                    (loading ? "; the checkpoint is corrupt or truncated (resume from an older one)" : ""),
                loading ? LOOM_STATUS_CODE_INVALID_ARGUMENT : LOOM_STATUS_CODE_INTERNAL);
  throw Error(std::string("safetensors: ") + e.what(), LOOM_STATUS_CODE_INTERNAL);
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
    std::vector<fmt::OutgoingTensor> out;
    out.reserve(tensors.size());
    for (const NamedTensor& t : tensors) out.push_back(describe(t));
    try {
      fmt::write_safetensors(loom::ckpt::join_path(dir, file_), std::move(out),
                             {{"format", "pt"}, {kLoomKey, metadata_json}});
    } catch (const fmt::FormatError& e) {
      rethrow(e, /*loading=*/false);
    }
  }

  void load(const std::string& dir, Reader& reader) override {
    const std::string path = loom::ckpt::join_path(dir, file_);
    ::close(loom::ckpt::MappedInput::open_for_reading(kBackend, path));  // a missing file: its own message
    try {
      const fmt::SafetensorsFile file(path);
      for (const fmt::TensorEntry& e : file.tensors()) {
        DLTensor t{};
        t.data = const_cast<unsigned char*>(file.data(e));  // borrowed for the call
        t.device = {kDLCPU, 0};
        t.ndim = int32_t(e.shape.size());
        t.dtype = e.dtype->dl;
        t.shape = const_cast<int64_t*>(e.shape.data());
        t.strides = nullptr;  // compact row-major
        t.byte_offset = 0;
        reader.tensor(e.name, t);
      }
      const auto meta = file.metadata().find(kLoomKey);
      if (meta != file.metadata().end()) reader.metadata(meta->second);
    } catch (const fmt::FormatError& e) {
      rethrow(e, /*loading=*/true);
    }
  }

 private:
  std::string file_;
};

}  // namespace

LOOM_PLUGIN("safetensors", "0.1.0", loom::component<Safetensors>())
