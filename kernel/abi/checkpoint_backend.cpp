#include "abi/checkpoint_backend.hpp"

#include <memory>
#include <stdexcept>
#include <string>

#include "abi/dlpack_tensor.hpp"

namespace loom {
namespace {

// Tensor names become keys, file names (sharded parts, exports) and log text: a name from a
// file is accepted only as a short run of '/'-separated plain components.
constexpr size_t kMaxTensorName = 1024;

void check_tensor_name(const char* raw, const LoadedCheckpoint& so_far) {
  const std::string name = raw ? raw : "";
  const std::string shown = "\"" + name.substr(0, 80) + (name.size() > 80 ? "...\"" : "\"");
  if (name.empty()) throw std::runtime_error("a tensor has an empty name");
  if (name.size() > kMaxTensorName)
    throw std::runtime_error("tensor " + shown + " has a name of " + std::to_string(name.size()) + " bytes (at most " +
                             std::to_string(kMaxTensorName) + ")");
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f) throw std::runtime_error("tensor " + shown + " has a control character in its name");
  size_t start = 0;
  for (;;) {
    const size_t slash = name.find('/', start);
    const std::string part = name.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..")
      throw std::runtime_error("tensor " + shown + " has an empty, \".\" or \"..\" part in its name");
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (so_far.tensors.count(name)) throw std::runtime_error("tensor " + shown + " appears twice");
}

}  // namespace

CheckpointBackendInstance::CheckpointBackendInstance(const SlotConfig& slot, const RunContext& run)
    : Instance(slot, run) {
  create();
}

void CheckpointBackendInstance::save(const std::string& dir, const NamedTensors& tensors,
                                     const std::string& metadata_json) {
  std::vector<std::unique_ptr<DLTensorView>> views;
  std::vector<loom_named_tensor> items;
  std::vector<const loom_named_tensor*> pointers;
  views.reserve(tensors.size());
  items.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    views.push_back(std::make_unique<DLTensorView>(tensor));
    loom_named_tensor item{};
    item.struct_size = sizeof(item);
    item.name = name.c_str();
    item.tensor = views.back()->get();
    items.push_back(item);
  }
  for (const auto& item : items) pointers.push_back(&item);
  check(vt_.save(handle_, dir.c_str(), pointers.data(), pointers.size(), metadata_json.c_str()), "save");
}

LoadedCheckpoint CheckpointBackendInstance::load(const std::string& dir) {
  struct Sink {
    LoadedCheckpoint out;
    std::string who;
  } sink{{}, where()};
  loom_checkpoint_reader reader{};
  reader.struct_size = sizeof(reader);
  reader.user = &sink;
  // Host callbacks run inside the plugin's frames: no exception may escape them.
  reader.on_tensor = [](void* user, const char* name, const DLTensor* t) -> loom_status* {
    auto* s = static_cast<Sink*>(user);
    try {
      check_tensor_name(name, s->out);
      s->out.tensors[name] = tensor_copy_from_dltensor(*t, s->who);
      return nullptr;
    } catch (const std::exception& e) {
      return host_api()->status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT, e.what());
    }
  };
  reader.on_metadata = [](void* user, const char* json) -> loom_status* {
    static_cast<Sink*>(user)->out.metadata_json = json ? json : "";
    return nullptr;
  };
  check_input(vt_.load(handle_, dir.c_str(), &reader), "load");
  return std::move(sink.out);
}

}  // namespace loom
