// loom/dataset.hpp: derive from loom::Dataset to write a dataset component (torch-free).
//
//   struct Zeros final : loom::Dataset {
//     static constexpr const char* name = "zeros";
//     static constexpr const char* summary = "All-zero batches.";
//     Zeros(const loom::Config&, const loom::Context&) {}
//     Batch next() override {
//       return {loom::dlpack_int64(std::vector<int64_t>(8 * 16), {8, 16}),
//               loom::dlpack_int64(std::vector<int64_t>(8 * 16), {8, 16}),
//               {{"position_ids", loom::dlpack_int64(std::vector<int64_t>(8 * 16), {8, 16})}}};
//     }
//   };
//
// Fields beyond inputs and targets (ABI 1.2; loom/dataset.h lists the standard names) go in
// Batch::fields; a host older than 1.2 does not receive them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <loom/dlpack.hpp>
#include <loom/plugin.hpp>

namespace loom {

class Dataset {
 public:
  struct Field {
    std::string name;         // lower snake case; not input_ids or labels (those are the above)
    DLManagedTensor* tensor;  // any dtype and rank, CPU; ownership passes to the host
  };
  struct Batch {
    DLManagedTensor* inputs;   // int64 (B, T); ownership passes to the host
    DLManagedTensor* targets;  // int64 (B, T); ownership passes to the host
    std::vector<Field> fields = {};  // (ABI 1.2) the batch's other named fields, in order
    bool end_of_epoch = false;       // (ABI 1.2) see epoch_end()
    bool end_of_data = false;        // (ABI 1.7) see data_end()
  };
  // (ABI 1.2) What a finite dataset's next() returns, once, when the epoch has no batch left:
  // no tensors, the end of the epoch. The next call starts the next epoch.
  static Batch epoch_end() {
    Batch b{nullptr, nullptr};
    b.end_of_epoch = true;
    return b;
  }
  // (ABI 1.7) What a finite stream's next() returns when it has no batch left at all: the run
  // stops there (on every rank). A host older than 1.7 cannot stop, so it gets a failure.
  static Batch data_end() {
    Batch b{nullptr, nullptr};
    b.end_of_data = true;
    return b;
  }
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
  // (ABI 1.2) Batches of one epoch on this rank, for run.epochs; a dataset that does not
  // override it reports none (endless or unknown).
  virtual int64_t batches_per_epoch() const { return 0; }
  // (ABI 1.20) True: when a run resumes at another world size and the saved ranks' positions
  // differ, load_state() receives all of them in one record (decode_saved_world below) and this
  // rank takes its share of what they had left. False: the host refuses such a resume.
  virtual bool resumes_other_world_size() const { return false; }
};

// (ABI 1.20) The saved ranks' states when `state` is a LOOM_SAVED_WORLD_MAGIC record (loom/dataset.h),
// rank 0 first; nullopt when it is one rank's own state. Throws loom::Error (invalid argument)
// for a record whose sizes do not add up (a checkpoint is untrusted input).
inline std::optional<std::vector<std::string>> decode_saved_world(const std::string& state) {
  constexpr size_t kMagic = sizeof(LOOM_SAVED_WORLD_MAGIC) - 1;
  if (state.size() < kMagic || state.compare(0, kMagic, LOOM_SAVED_WORLD_MAGIC) != 0) return std::nullopt;
  const auto damaged = [] {
    return Error("the saved positions of another world size are damaged; resume from another checkpoint",
                 LOOM_STATUS_CODE_INVALID_ARGUMENT);
  };
  const auto load = [&](size_t at, size_t bytes) {
    if (at > state.size() || state.size() - at < bytes) throw damaged();
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(state[at + i])) << (8 * i);
    return v;
  };
  const uint64_t count = load(kMagic, 4);
  if (count == 0 || load(kMagic + 4, 4) != 0) throw damaged();
  std::vector<std::string> states;
  size_t at = kMagic + 8;
  for (uint64_t r = 0; r < count; ++r) {
    const uint64_t n = load(at, 8);
    at += 8;
    if (n > state.size() - at) throw damaged();
    states.push_back(state.substr(at, size_t(n)));
    at += size_t(n);
  }
  if (at != state.size()) throw damaged();
  return states;
}

namespace detail {

// Hands a batch to the host: inputs and targets in *out, every other field through the host's
// add_field (which takes each tensor even when it fails; the first failure is returned).
inline loom_status* dataset_next(Dataset& dataset, loom_batch* out) {
  // A host older than ABI 1.2 has no end_of_epoch: it gets the next epoch's first batch instead.
  const bool host_takes_epochs = out->struct_size >= offsetof(loom_batch, end_of_epoch) + sizeof(int32_t);
  Dataset::Batch b{};
  do {
    if (loom_status* failed = guard([&] { b = dataset.next(); })) return failed;
  } while (b.end_of_epoch && !host_takes_epochs);
  loom_batch filled = read_in(out);  // keeps the host's fields and add_field
  if (b.end_of_data) {
    if (out->struct_size < offsetof(loom_batch, end_of_data) + sizeof(int32_t))
      return host().status_create(LOOM_STATUS_CODE_OUT_OF_RANGE,
                                  "the data has no batch left, and this host (before Loom ABI 1.7) cannot end a run "
                                  "there; set run.steps within the data or update the host");
    filled.end_of_data = 1;
    write_out(out, filled);
    return nullptr;
  }
  if (b.end_of_epoch) {
    filled.end_of_epoch = 1;
    write_out(out, filled);
    return nullptr;
  }
  filled.inputs = b.inputs;
  filled.targets = b.targets;
  write_out(out, filled);
  loom_status* first_failure = nullptr;
  for (const Dataset::Field& f : b.fields) {
    if (filled.add_field == nullptr) {  // a host older than ABI 1.2 takes no fields
      if (f.tensor && f.tensor->deleter) f.tensor->deleter(f.tensor);
      continue;
    }
    loom_status* s = filled.add_field(filled.fields, f.name.c_str(), f.tensor);
    if (first_failure == nullptr) first_failure = s;
    else host().status_destroy(s);
  }
  return first_failure;
}

LOOM_DETAIL_MEMBER_POINTER(batches_per_epoch)
LOOM_DETAIL_MEMBER_POINTER(resumes_other_world_size)

inline loom_status* dataset_info(loom_dataset* handle, loom_dataset_info_args* out) {
  return guard([&] {
    loom_dataset_info_args info = read_in(out);
    info.batches_per_epoch = self<Dataset>(handle).batches_per_epoch();
    info.resumes_other_world_size = self<Dataset>(handle).resumes_other_world_size() ? 1 : 0;
    write_out(out, info);  // a host before 1.20 sized it without the flag
  });
}

// The info callback only for a dataset that says something through it.
template <class T>
inline constexpr bool dataset_has_info =
    overridden<typename batches_per_epoch_pointer<T>::type, int64_t (Dataset::*)() const> ||
    overridden<typename resumes_other_world_size_pointer<T>::type, bool (Dataset::*)() const>;

}  // namespace detail

template <class T>
const void* Dataset::vtable() {
  static const loom_dataset_vtable vt = {
      sizeof(loom_dataset_vtable),
      [](const loom_context* c, const loom_config* cfg, loom_dataset** out) {
        return detail::create<Dataset, T>(c, cfg, out);
      },
      &detail::destroy<Dataset, loom_dataset>,
      [](loom_dataset* d, loom_batch* out) { return detail::dataset_next(detail::self<Dataset>(d), out); },
      detail::state_callbacks<T, Dataset, loom_dataset>::save,
      detail::state_callbacks<T, Dataset, loom_dataset>::load,
      detail::dataset_has_info<T> ? &detail::dataset_info : nullptr};
  return &vt;
}

}  // namespace loom
