// torch_pickle.cpp: the `torch_pickle` checkpoint backend. It writes two files into each
// checkpoint directory:
//   state.pt       LibTorch's pickle_save of a c10::Dict<std::string, at::Tensor>: the archive
//                  format of Python's torch.save, so `torch.load("state.pt")` returns a dict of
//                  CPU tensors keyed by name (verified with Debian's python3-torch);
//   metadata.json  the manager's metadata JSON, byte for byte. A separate file rather than an
//                  entry in the dict, so Python sees tensors only and people can read it.
// It links LibTorch only for the archive format; tensors still cross the ABI as DLPack.
//
// Limitation: pickle_save builds the whole archive in memory before it is written, so a save
// briefly needs about the checkpoint's size in extra RAM. The safetensors backend streams.
#include <loom/checkpoint.hpp>
#include <loom/torch.hpp>

#include <torch/csrc/jit/serialization/pickle.h>

#include <cerrno>
#include <string>
#include <vector>

#include "checkpoint_files.hpp"

namespace {

using loom::Error;

constexpr const char* kBackend = "torch_pickle";
constexpr const char* kMetadataFile = "metadata.json";

struct DType {
  DLDataType dl;
  at::ScalarType torch;
};
// Every DLPack 0.6 dtype that LibTorch 1.13 also has.
constexpr DType kDTypes[] = {
    {{kDLFloat, 64, 1}, at::kDouble}, {{kDLFloat, 32, 1}, at::kFloat}, {{kDLFloat, 16, 1}, at::kHalf},
    {{kDLBfloat, 16, 1}, at::kBFloat16}, {{kDLInt, 64, 1}, at::kLong}, {{kDLInt, 32, 1}, at::kInt},
    {{kDLInt, 16, 1}, at::kShort},      {{kDLInt, 8, 1}, at::kChar},   {{kDLUInt, 8, 1}, at::kByte},
};

at::ScalarType torch_type(DLDataType t, const std::string& name) {
  for (const DType& d : kDTypes)
    if (d.dl.code == t.code && d.dl.bits == t.bits && d.dl.lanes == t.lanes) return d.torch;
  throw Error("torch_pickle: tensor '" + name + "' has a dtype (DLPack code " + std::to_string(t.code) + ", " +
              std::to_string(t.bits) + " bits, " + std::to_string(t.lanes) +
              " lanes) this backend cannot store; it stores float64/32/16, bfloat16, int64/32/16/8 and uint8");
}

DLDataType dl_type(at::ScalarType t, const std::string& name, const std::string& path) {
  for (const DType& d : kDTypes)
    if (d.torch == t) return d.dl;
  throw Error("torch_pickle: tensor '" + name + "' in '" + path + "' has dtype " + c10::toString(t) +
              ", which cannot cross the checkpoint ABI");
}

// A borrowed CPU DLTensor as an at::Tensor over the same memory (no copy).
at::Tensor wrap(const loom::NamedTensor& t) {
  const std::string name = t.name;
  const DLTensor& dl = *t.tensor;
  if (name.empty()) throw Error("torch_pickle: a tensor has an empty name");
  if (dl.device.device_type != kDLCPU)
    throw Error("torch_pickle: tensor '" + name + "' is not on the CPU", LOOM_STATUS_CODE_INTERNAL);
  if (dl.ndim < 0 || (dl.ndim > 0 && dl.shape == nullptr))
    throw Error("torch_pickle: tensor '" + name + "' has no valid shape", LOOM_STATUS_CODE_INTERNAL);
  const at::ScalarType type = torch_type(dl.dtype, name);
  const at::IntArrayRef shape(dl.shape, size_t(dl.ndim));
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("torch_pickle: tensor '" + name + "' has a negative dimension", LOOM_STATUS_CODE_INTERNAL);
    elements *= d;
  }
  if (dl.strides != nullptr) {  // explicit strides are fine when they describe row-major order
    int64_t expected = 1;
    for (int i = dl.ndim - 1; i >= 0; --i) {
      if (dl.shape[i] != 1 && dl.strides[i] != expected)
        throw Error("torch_pickle: tensor '" + name + "' is not contiguous row-major", LOOM_STATUS_CODE_INTERNAL);
      expected *= dl.shape[i];
    }
  }
  const auto options = at::TensorOptions().dtype(type).device(at::kCPU);
  if (elements == 0 || dl.data == nullptr) {
    if (elements != 0) throw Error("torch_pickle: tensor '" + name + "' has no data", LOOM_STATUS_CODE_INTERNAL);
    return at::empty(shape, options);
  }
  // pickle_save only reads the memory, so dropping const is sound.
  return at::from_blob(static_cast<char*>(dl.data) + dl.byte_offset, shape, options);
}

class TorchPickle final : public loom::CheckpointBackend {
 public:
  static constexpr const char* name = "torch_pickle";
  static constexpr const char* summary =
      "Checkpoints as a torch.save-compatible dict of tensors (Python torch.load opens it) plus metadata.json.";
  static constexpr loom_option_spec options[] = {
      loom::option("file", LOOM_OPTION_TYPE_STRING, "state.pt",
                   "Tensor archive's file name inside each checkpoint directory (metadata goes to metadata.json)."),
  };

  TorchPickle(const loom::Config& c, const loom::Context&) : file_(loom::ckpt::file_name_option(c, "file", kBackend)) {
    if (file_ == kMetadataFile) throw Error("torch_pickle: option file may not be \"metadata.json\", which holds the metadata");
  }

  void save(const std::string& dir, const std::vector<NamedTensor>& tensors, const std::string& metadata_json) override {
    c10::Dict<std::string, at::Tensor> dict;  // keeps insertion order, as torch.load's dict will
    for (const NamedTensor& t : tensors)
      if (!dict.insert(t.name, wrap(t)).second)
        throw Error(std::string("torch_pickle: two tensors are named '") + t.name + "'", LOOM_STATUS_CODE_INTERNAL);
    std::vector<char> archive;
    try {
      archive = torch::jit::pickle_save(c10::IValue(dict));
    } catch (const c10::Error& e) {
      throw Error(std::string("torch_pickle: pickle_save failed: ") + e.what_without_backtrace(), LOOM_STATUS_CODE_INTERNAL);
    }
    dict.clear();  // the archive holds its own copy of the bytes

    loom::ckpt::OutputFile state(kBackend, loom::ckpt::join_path(dir, file_));
    state.write(archive.data(), archive.size());
    state.commit();
    archive = std::vector<char>();  // free before writing the small file
    loom::ckpt::OutputFile metadata(kBackend, loom::ckpt::join_path(dir, kMetadataFile));
    metadata.write(metadata_json.data(), metadata_json.size());
    metadata.commit();
  }

  void load(const std::string& dir, Reader& reader) override {
    const std::string path = loom::ckpt::join_path(dir, file_);
    c10::IValue value;
    {
      const std::vector<char> bytes = loom::ckpt::read_whole_file(kBackend, path);
      try {
        value = torch::jit::pickle_load(bytes);
      } catch (const c10::Error& e) {
        corrupt(path, e.what_without_backtrace());
      } catch (const std::exception& e) {
        corrupt(path, e.what());
      }
    }
    if (!value.isGenericDict()) corrupt(path, "it holds a " + value.tagKind() + ", not a dict of tensors");
    // Check every entry before the host sees any.
    for (const auto& item : value.toGenericDict()) {
      if (!item.key().isString()) corrupt(path, "a key of its dict is a " + item.key().tagKind() + ", not a string");
      if (!item.value().isTensor() || !item.value().toTensor().defined())
        corrupt(path, "entry '" + item.key().toStringRef() + "' is not a tensor");
      dl_type(item.value().toTensor().scalar_type(), item.key().toStringRef(), path);
    }
    for (const auto& item : value.toGenericDict()) {
      const std::string& name = item.key().toStringRef();
      const at::Tensor tensor = item.value().toTensor().to(at::kCPU).contiguous();
      std::vector<int64_t> shape = tensor.sizes().vec();
      DLTensor t{};
      t.data = tensor.data_ptr();  // borrowed for the call
      t.device = {kDLCPU, 0};
      t.ndim = int32_t(shape.size());
      t.dtype = dl_type(tensor.scalar_type(), name, path);
      t.shape = shape.data();
      t.strides = nullptr;  // compact row-major
      t.byte_offset = 0;
      reader.tensor(name, t);
    }
    const std::string metadata_path = loom::ckpt::join_path(dir, kMetadataFile);
    if (::access(metadata_path.c_str(), F_OK) != 0 && errno == ENOENT) return;  // a plain torch.save file
    const std::vector<char> metadata = loom::ckpt::read_whole_file(kBackend, metadata_path);
    reader.metadata(std::string(metadata.begin(), metadata.end()));
  }

 private:
  [[noreturn]] static void corrupt(const std::string& path, const std::string& what) {
    throw Error("torch_pickle: cannot read '" + path + "' as a torch.save archive: " + what +
                    "; the checkpoint is corrupt or truncated (resume from an older one)",
                LOOM_STATUS_CODE_INVALID_ARGUMENT);
  }

  std::string file_;
};

}  // namespace

LOOM_PLUGIN("torch_pickle", "0.1.0", loom::component<TorchPickle>())
