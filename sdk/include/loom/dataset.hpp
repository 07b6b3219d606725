// loom/dataset.hpp: derive from loom::Dataset to write a dataset component (torch-free).
//
//   struct Zeros final : loom::Dataset {
//     static constexpr const char* name = "zeros";
//     static constexpr const char* summary = "All-zero batches.";
//     Zeros(const loom::Config&, const loom::Context&) {}
//     Batch next() override {
//       return {loom::dlpack_int64(std::vector<int64_t>(8 * 16), {8, 16}),
//               loom::dlpack_int64(std::vector<int64_t>(8 * 16), {8, 16})};
//     }
//   };
#pragma once

#include <string>

#include <loom/dlpack.hpp>
#include <loom/plugin.hpp>

namespace loom {

class Dataset {
 public:
  struct Batch {
    DLManagedTensor* inputs;   // int64 (B, T); ownership passes to the host
    DLManagedTensor* targets;  // int64 (B, T); ownership passes to the host
  };
  static constexpr loom_kind kind = LOOM_KIND_DATASET;
  template <class T>
  static const void* vtable();

  virtual ~Dataset() = default;
  virtual Batch next() = 0;
  // Exact position for resume, kept in checkpoints: override both or neither. A dataset that
  // overrides neither gets no state callbacks, and a resumed run warns that its batches differ
  // from an uninterrupted run's.
  virtual std::string save_state() const { return {}; }
  virtual void load_state(const std::string& state) { (void)state; }
};

template <class T>
const void* Dataset::vtable() {
  static const loom_dataset_vtable vt = {
      sizeof(loom_dataset_vtable),
      [](const loom_context* c, const loom_config* cfg, loom_dataset** out) {
        return detail::create<Dataset, T>(c, cfg, out);
      },
      &detail::destroy<Dataset, loom_dataset>,
      [](loom_dataset* d, loom_batch* out) {
        return guard([&] {
          const Dataset::Batch b = detail::self<Dataset>(d).next();
          write_out(out, loom_batch{sizeof(loom_batch), b.inputs, b.targets});
        });
      },
      detail::state_callbacks<T, Dataset, loom_dataset>::save,
      detail::state_callbacks<T, Dataset, loom_dataset>::load};
  return &vt;
}

}  // namespace loom
