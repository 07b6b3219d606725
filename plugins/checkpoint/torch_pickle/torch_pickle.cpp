// torch_pickle.cpp: the `torch_pickle` checkpoint backend. It writes two files into each
// checkpoint directory:
//   state.pt       a torch.save archive (zip of data.pkl plus one record per storage) of a dict
//                  of CPU tensors keyed by name: `torch.load("state.pt", weights_only=True)`
//                  opens it (verified with Debian's python3-torch and a restricted unpickler);
//   metadata.json  the manager's metadata JSON, byte for byte. A separate file rather than an
//                  entry in the dict, so Python sees tensors only and people can read it.
// Writing uses LibTorch's pickler and zip writer, streamed straight into the file. Reading is
// for files from other people: LibTorch's zip reader (miniz) finds the records, but data.pkl
// goes through tensor_pickle.cpp's restricted reader, never LibTorch's recursive unpickler,
// and every tensor view is checked against its storage record before a byte is copied.
// Tensors cross the ABI as DLPack.
#include <loom/checkpoint.hpp>
#include <loom/torch.hpp>

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <cerrno>
#include <exception>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugins/checkpoint/common/checkpoint_files.hpp"
#include "tensor_pickle.hpp"

namespace {

using loom::Error;

constexpr const char* kBackend = "torch_pickle";
constexpr const char* kMetadataFile = "metadata.json";

struct DType {
  DLDataType dl;
  at::ScalarType torch;
  const char* storage;  // the storage class torch.save names for it
};
// Every DLPack 0.6 dtype that LibTorch 1.13 also has.
constexpr DType kDTypes[] = {
    {{kDLFloat, 64, 1}, at::kDouble, "DoubleStorage"},   {{kDLFloat, 32, 1}, at::kFloat, "FloatStorage"},
    {{kDLFloat, 16, 1}, at::kHalf, "HalfStorage"},       {{kDLBfloat, 16, 1}, at::kBFloat16, "BFloat16Storage"},
    {{kDLInt, 64, 1}, at::kLong, "LongStorage"},         {{kDLInt, 32, 1}, at::kInt, "IntStorage"},
    {{kDLInt, 16, 1}, at::kShort, "ShortStorage"},       {{kDLInt, 8, 1}, at::kChar, "CharStorage"},
    {{kDLUInt, 8, 1}, at::kByte, "ByteStorage"},
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

// Every refusal of a file: one line naming it and what is wrong.
[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw Error("torch_pickle: cannot read '" + path + "' as a torch.save archive: " + what +
                  "; the checkpoint is corrupt or truncated, or not a file of tensors (resume from an older one)",
              LOOM_STATUS_CODE_INVALID_ARGUMENT);
}

constexpr uint64_t kMaxMetadataBytes = uint64_t(256) << 20;
// No real tensor has more elements; a larger shape (even one with a zero in it) is damage.
constexpr int64_t kMaxElements = int64_t(1) << 48;

// LibTorch's zip reader over the mapped file, with every read bounds-checked.
class MappedAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit MappedAdapter(const loom::ckpt::MappedInput& file) : file_(file) {}
  size_t size() const override { return size_t(file_.size()); }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= file_.size()) return 0;
    n = size_t(std::min<uint64_t>(n, file_.size() - pos));
    std::memcpy(buf, file_.data() + pos, n);
    return n;
  }

 private:
  const loom::ckpt::MappedInput& file_;
};

struct Record {
  at::DataPtr bytes;
  const unsigned char* data = nullptr;
  size_t size = 0;
};

// The records of a torch.save zip archive, by their name under the archive's folder.
class ArchiveRecords {
 public:
  ArchiveRecords(const loom::ckpt::MappedInput& file, std::string path) : path_(std::move(path)) {
    try {
      zip_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(std::make_shared<MappedAdapter>(file));
    } catch (const c10::Error& e) {
      corrupt(path_, std::string("not a torch.save zip archive (") + e.what_without_backtrace() + ")");
    }
  }
  Record record(const std::string& name) {
    Record r;
    try {
      if (!zip_->hasRecord(name)) corrupt(path_, "it has no record " + name);
      auto [bytes, size] = zip_->getRecord(name);
      r.bytes = std::move(bytes);
      r.size = size;
    } catch (const c10::Error& e) {
      corrupt(path_, "record " + name + " cannot be read (" + e.what_without_backtrace() + ")");
    }
    r.data = static_cast<const unsigned char*>(r.bytes.get());
    return r;
  }

 private:
  std::string path_;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> zip_;
};

// The tensor a pickled view describes, after checking in overflow-safe arithmetic that every
// element it addresses lies inside its storage, and the storage inside its record.
at::Tensor checked_view(const loom::torch_pickle::PickledTensor& d, const Record& storage, const std::string& path) {
  const std::string what = "tensor '" + d.name.substr(0, 200) + "'";
  const DType* type = nullptr;
  for (const DType& t : kDTypes)
    if (d.storage_type == t.storage) type = &t;
  if (type == nullptr)
    corrupt(path, what + " is a " + d.storage_type + ", which cannot cross the checkpoint ABI (it carries " +
                      "float64/32/16, bfloat16, int64/32/16/8 and uint8)");
  const int64_t element = type->dl.bits / 8;
  int64_t storage_bytes = 0;
  if (__builtin_mul_overflow(d.storage_numel, element, &storage_bytes) || uint64_t(storage_bytes) > storage.size)
    corrupt(path, what + ": its storage declares " + std::to_string(d.storage_numel) + " elements of " +
                      std::to_string(element) + " bytes, but record data/" + d.storage_key + " holds " +
                      std::to_string(storage.size) + " bytes");
  if (d.offset < 0) corrupt(path, what + " has a negative storage offset");
  int64_t elements = 1, nonzero = 1, last = d.offset;  // last: the highest element index addressed
  for (size_t i = 0; i < d.sizes.size(); ++i) {
    if (d.sizes[i] < 0 || d.strides[i] < 0) corrupt(path, what + " has a negative size or stride");
    if (d.sizes[i] > 0 && __builtin_mul_overflow(nonzero, d.sizes[i], &nonzero)) nonzero = kMaxElements + 1;
    if (nonzero > kMaxElements) corrupt(path, what + " has an impossible shape (more than 2^48 elements)");
    elements *= d.sizes[i];
  }
  if (elements > 0) {
    for (size_t i = 0; i < d.sizes.size(); ++i) {
      int64_t reach = 0;
      if (__builtin_mul_overflow(d.sizes[i] - 1, d.strides[i], &reach) || __builtin_add_overflow(last, reach, &last))
        corrupt(path, what + " addresses elements beyond any storage");
    }
    if (last >= d.storage_numel)
      corrupt(path, what + " (offset " + std::to_string(d.offset) + ", " + std::to_string(elements) +
                        " elements) reaches element " + std::to_string(last) + " of a storage of " +
                        std::to_string(d.storage_numel));
  }
  const auto options = at::TensorOptions().dtype(type->torch).device(at::kCPU);
  if (elements == 0) return at::empty(d.sizes, options);
  // from_blob only reads here; the record outlives the copy the caller makes.
  void* data = const_cast<unsigned char*>(storage.data);
  return at::from_blob(data, {d.storage_numel}, options).as_strided(d.sizes, d.strides, d.offset);
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
    loom::ckpt::OutputFile state(kBackend, loom::ckpt::join_path(dir, file_));
    try {
      // As torch::jit::pickle_save, but without tagging the dict's type: the tag is a call to
      // torch.jit._pickle.restore_type_tag, which torch.load(weights_only=True) refuses.
      std::vector<char> pickle;
      torch::jit::Pickler pickler([&](const char* p, size_t n) { pickle.insert(pickle.end(), p, p + n); }, nullptr,
                                  nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
      pickler.protocol();
      pickler.pushIValue(c10::IValue(dict));
      pickler.stop();
      // Streamed into the file: no second copy of the tensors in memory. The zip writer must
      // never see a failed write (its destructor would finish the archive and throw again),
      // so the first failure is kept, later bytes are dropped, and it is thrown at the end.
      std::exception_ptr write_failure;
      caffe2::serialize::PyTorchStreamWriter zip([&](const void* p, size_t n) {
        if (!write_failure) try {
            state.write(p, n);
          } catch (...) {
            write_failure = std::current_exception();
          }
        return n;
      });
      torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), zip);
      zip.writeEndOfFile();
      if (write_failure) std::rethrow_exception(write_failure);
    } catch (const c10::Error& e) {
      throw Error(std::string("torch_pickle: cannot write the archive: ") + e.what_without_backtrace(),
                  LOOM_STATUS_CODE_INTERNAL);
    }
    state.commit();
    loom::ckpt::OutputFile metadata(kBackend, loom::ckpt::join_path(dir, kMetadataFile));
    metadata.write(metadata_json.data(), metadata_json.size());
    metadata.commit();
  }

  void load(const std::string& dir, Reader& reader) override {
    const std::string path = loom::ckpt::join_path(dir, file_);
    const loom::ckpt::MappedInput file(kBackend, path);
    ArchiveRecords archive(file, path);
    std::vector<loom::torch_pickle::PickledTensor> described;
    {
      const Record pickle = archive.record("data.pkl");
      try {
        described = loom::torch_pickle::read_tensor_dict(pickle.data, pickle.size);
      } catch (const loom::torch_pickle::PickleError& e) {
        corrupt(path, e.what());
      }
    }
    std::map<std::string, Record> storages;  // tensors may share one
    for (const auto& d : described) {
      auto it = storages.find(d.storage_key);
      if (it == storages.end()) it = storages.emplace(d.storage_key, archive.record("data/" + d.storage_key)).first;
      const at::Tensor tensor = checked_view(d, it->second, path).contiguous();
      std::vector<int64_t> shape = tensor.sizes().vec();
      DLTensor t{};
      t.data = tensor.data_ptr();  // borrowed for the call
      t.device = {kDLCPU, 0};
      t.ndim = int32_t(shape.size());
      t.dtype = dl_type(tensor.scalar_type(), d.name, path);
      t.shape = shape.data();
      t.strides = nullptr;  // compact row-major
      t.byte_offset = 0;
      reader.tensor(d.name, t);
    }
    const std::string metadata_path = loom::ckpt::join_path(dir, kMetadataFile);
    if (::access(metadata_path.c_str(), F_OK) != 0 && errno == ENOENT) return;  // a plain torch.save file
    const std::vector<char> metadata = loom::ckpt::read_whole_file(kBackend, metadata_path, kMaxMetadataBytes);
    reader.metadata(std::string(metadata.begin(), metadata.end()));
  }

 private:
  std::string file_;
};

}  // namespace

LOOM_PLUGIN("torch_pickle", "0.1.0", loom::component<TorchPickle>())
