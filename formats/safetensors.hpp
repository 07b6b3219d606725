// safetensors.hpp: the public safetensors format, read and written without LibTorch.
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
// The writer pads the header with spaces to a multiple of 8 bytes and stores tensors in order
// of decreasing element size (stable), so every tensor starts naturally aligned in the file
// and in a memory map of it, as the reference writer does.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "files.hpp"

namespace loom::formats {

struct DType {
  const char* name;  // as the header spells it: "F32", "BF16", ...
  DLDataType dl;
  uint64_t bytes;    // per element
};

const DType* dtype_named(const std::string& name);  // nullptr when the format has no such dtype
const DType* dtype_of(DLDataType type);              // nullptr when the format cannot store it
std::string dtype_list();                            // "F64, F32, ..." for messages

// One tensor as a header describes it.
struct TensorEntry {
  std::string name;
  const DType* dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to the byte buffer
};

// A safetensors file, memory-mapped, its whole header validated on open: a truncated or
// corrupted file throws a FormatError (Kind::invalid) before a single tensor is handed out.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }  // in file order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorEntry* find(const std::string& name) const;
  // The entry's bytes inside the map: valid while this object lives.
  const unsigned char* data(const TensorEntry& entry) const { return file_.data() + data_start_ + entry.begin; }
  // Drops the entry's pages from the resident set once they have been copied.
  void release(const TensorEntry& entry) const {
    file_.release(data_start_ + entry.begin, data_start_ + entry.end);
  }

 private:
  MappedFile file_;
  uint64_t data_start_ = 0;
  std::vector<TensorEntry> tensors_;
  std::map<std::string, size_t> by_name_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to write: bytes row-major, borrowed for the call.
struct OutgoingTensor {
  std::string name;
  const DType* dtype = nullptr;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// Writes one safetensors file at path (fsync'd before it returns). Names must be unique,
// non-empty and not "__metadata__"; each tensor's bytes are its shape times its element size.
void write_safetensors(const std::string& path, std::vector<OutgoingTensor> tensors,
                       const std::map<std::string, std::string>& metadata);

// elements * element_bytes, or false on a negative dimension or overflow.
bool tensor_bytes(const std::vector<int64_t>& shape, uint64_t element_bytes, uint64_t* out);

}  // namespace loom::formats
