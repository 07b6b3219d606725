// tensor_pickle.hpp: a restricted reader for the data.pkl inside a torch.save archive that
// holds a dict (or OrderedDict, as state_dict() returns) of tensors keyed by strings.
//
// Files come from other people, so this is not a general unpickler: it runs only the opcodes
// and calls that such a dict needs (a subset of what PyTorch's weights_only unpickler
// allows), keeps no recursion (a value's nesting depth is counted and bounded instead), and
// describes each tensor without touching any tensor data. torch_pickle.cpp then checks every
// view against its storage record before copying a byte.
//
// Opcodes are those of pickle protocols 2-4 as documented in CPython's Lib/pickletools.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace loom::torch_pickle {

// What is wrong with the pickle, in words ("opcode 0x63 at byte 12 loads os.system, which ...").
class PickleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One tensor as _rebuild_tensor_v2 describes it: a view (offset, sizes, strides, in elements)
// over a typed storage kept in the archive as the record data/<storage_key>.
struct PickledTensor {
  std::string name;
  std::string storage_type;  // "FloatStorage", "BFloat16Storage", ...
  std::string storage_key;
  int64_t storage_numel = 0;  // elements the storage declares
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
};

// Limits a hostile file runs into before it costs real memory or time.
struct PickleLimits {
  int max_depth = 32;              // tuples within tuples (a tensor needs 3)
  size_t max_stack = 1 << 20;      // values on the stack at once
  size_t max_memo = 1 << 22;       // memo entries
  size_t max_tensor_dims = 64;
};

// The tensors of data.pkl in the order the dict holds them; throws PickleError.
std::vector<PickledTensor> read_tensor_dict(const unsigned char* data, size_t size,
                                            const PickleLimits& limits = PickleLimits());

}  // namespace loom::torch_pickle
