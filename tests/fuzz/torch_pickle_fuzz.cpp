// torch_pickle_fuzz.cpp: the torch_pickle backend's restricted reader of data.pkl,
// plugins/checkpoint/torch_pickle/tensor_pickle.hpp read_tensor_dict.
//
// The input is the pickle itself (the zip around it is LibTorch's). Documented refusal:
// loom::torch_pickle::PickleError. For a pickle that reads, what it returns must be usable:
// names unique, every view's sizes and strides of one length within the limit.
#include <cstdint>
#include <set>
#include <string>

#include "fuzz_support.hpp"
#include "plugins/checkpoint/torch_pickle/tensor_pickle.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loom_fuzz::expect_only<loom::torch_pickle::PickleError>("read_tensor_dict", [&] {
    const loom::torch_pickle::PickleLimits limits;
    const auto tensors = loom::torch_pickle::read_tensor_dict(data, size, limits);
    std::set<std::string> names;
    size_t sum = 0;
    for (const auto& t : tensors) {
      if (!names.insert(t.name).second) loom_fuzz::finding("tensor '" + t.name + "' returned twice");
      if (t.sizes.size() != t.strides.size() || t.sizes.size() > limits.max_tensor_dims)
        loom_fuzz::finding("tensor '" + t.name + "': sizes and strides of different or excessive lengths");
      if (t.storage_key.empty() || t.storage_numel < 0) loom_fuzz::finding("tensor '" + t.name + "': bad storage");
      sum += t.name.size() + t.storage_type.size() + t.sizes.size();
    }
    loom_fuzz::keep(sum);
  });
  return 0;
}
