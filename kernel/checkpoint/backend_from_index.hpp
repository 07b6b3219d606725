// backend_from_index.hpp: the backend that reads a checkpoint is the one its index names,
// with the options recorded there. Both resume (checkpoint_manager.cpp) and the checkpoint
// commands open it here, so they agree on every checkpoint.
#pragma once

#include <filesystem>
#include <memory>

#include "abi/checkpoint_backend.hpp"
#include "abi/registry.hpp"
#include "checkpoint/checkpoint_index.hpp"

namespace loom {

// An instance of record.use configured with record.options; options the index predates (a
// backend newer than the checkpoint) take the component's declared defaults. Throws a plugin
// Failure naming `checkpoint` when no loaded plugin provides the backend.
std::unique_ptr<CheckpointBackendInstance> open_backend(const CheckpointBackendRecord& record,
                                                        const Registry& registry,
                                                        const std::filesystem::path& checkpoint);

}  // namespace loom
