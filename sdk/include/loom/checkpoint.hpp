// loom/checkpoint.hpp: derive from loom::CheckpointBackend to write a checkpoint backend
// (torch-free). The host's checkpoint manager decides when and where; a backend only turns
// named CPU tensors plus a JSON string into files inside one directory, and back.
//
//   struct RawDump final : loom::CheckpointBackend {
//     static constexpr const char* name = "raw_dump";
//     static constexpr const char* summary = "One raw file per tensor (no shapes: a toy).";
//     RawDump(const loom::Config&, const loom::Context&) {}
//     void save(const std::string& dir, const std::vector<NamedTensor>& tensors,
//               const std::string& metadata_json) override {
//       for (const NamedTensor& t : tensors) { /* write t.tensor->data to dir + "/" + t.name */ }
//       (void)metadata_json;
//     }
//     void load(const std::string& dir, Reader& reader) override {
//       (void)dir;
//       reader.metadata("{}");  // and reader.tensor(name, dltensor) for each tensor found
//     }
//   };
#pragma once

#include <dlpack/dlpack.h>

#include <string>
#include <vector>

#include <loom/plugin.hpp>

namespace loom {

struct NamedTensor {
  const char* name;        // borrowed for the save call
  const DLTensor* tensor;  // borrowed for the save call; CPU, compact row-major
};

// What a load hands back to the host; borrowed for the load call. Each call copies what it is
// given, so the tensor's data may live in the backend's own buffer (an mmap, a read buffer)
// and be freed as soon as the call returns. A status the host returns (for example an
// unsupported dtype) is thrown as loom::Error.
class CheckpointReader {
 public:
  explicit CheckpointReader(const loom_checkpoint_reader* in) : reader_(read_in(in)) {}
  void tensor(const std::string& name, const DLTensor& tensor) {
    if (reader_.on_tensor == nullptr)
      throw Error("the host's checkpoint reader has no on_tensor callback", LOOM_STATUS_CODE_INTERNAL);
    check(reader_.on_tensor(reader_.user, name.c_str(), &tensor));
  }
  // A host without on_metadata does not want it: the call is then a no-op.
  void metadata(const std::string& json) {
    if (reader_.on_metadata != nullptr) check(reader_.on_metadata(reader_.user, json.c_str()));
  }

 private:
  loom_checkpoint_reader reader_;  // copy of the host's struct; user is borrowed for the load
};

class CheckpointBackend {
 public:
  using NamedTensor = loom::NamedTensor;
  using Reader = loom::CheckpointReader;
  static constexpr loom_kind kind = LOOM_KIND_CHECKPOINT;
  template <class T>
  static const void* vtable();

  virtual ~CheckpointBackend() = default;
  // dir exists and is empty. Files must be complete (written and fsync'd) when this returns;
  // the manager fsyncs the directory, indexes the files and renames the directory.
  virtual void save(const std::string& dir, const std::vector<NamedTensor>& tensors,
                    const std::string& metadata_json) = 0;
  // Calls reader.tensor once per stored tensor and reader.metadata with the stored JSON.
  virtual void load(const std::string& dir, Reader& reader) = 0;
};

template <class T>
const void* CheckpointBackend::vtable() {
  static const loom_checkpoint_vtable vt = {
      sizeof(loom_checkpoint_vtable),
      [](const loom_context* c, const loom_config* cfg, loom_checkpoint** out) {
        return detail::create<CheckpointBackend, T>(c, cfg, out);
      },
      &detail::destroy<CheckpointBackend, loom_checkpoint>,
      [](loom_checkpoint* b, const char* dir, const loom_named_tensor* const* tensors, size_t count,
         const char* metadata_json) {
        return guard([&] {
          if (dir == nullptr) throw Error("checkpoint save: no directory given");
          std::vector<NamedTensor> items;
          items.reserve(count);
          for (size_t i = 0; i < count; ++i) {
            if (tensors[i] == nullptr) throw Error("checkpoint save: tensor " + std::to_string(i) + " is NULL");
            const loom_named_tensor t = read_in(tensors[i]);
            if (t.name == nullptr || t.tensor == nullptr)
              throw Error("checkpoint save: tensor " + std::to_string(i) + " has no name or no data");
            items.push_back({t.name, t.tensor});
          }
          detail::self<CheckpointBackend>(b).save(dir, items, metadata_json ? metadata_json : "");
        });
      },
      [](loom_checkpoint* b, const char* dir, const loom_checkpoint_reader* reader) {
        return guard([&] {
          if (dir == nullptr || reader == nullptr) throw Error("checkpoint load: no directory or reader given");
          Reader r(reader);
          detail::self<CheckpointBackend>(b).load(dir, r);
        });
      }};
  return &vt;
}

}  // namespace loom
