// rebuilt_model.hpp: a trained model back in memory, for the commands that use one outside a
// run (export, generate): from a run folder (its newest valid checkpoint), a step-N checkpoint
// folder (both rebuilt from the resolved manifest the checkpoint carries, with its weights), or
// a Hugging Face model folder (built by the hf_causal_lm plugin). On the CPU; nothing written.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "abi/compute_components.hpp"
#include "abi/registry.hpp"

namespace loom {

struct RebuiltModel {
  Registry registry;  // first: the plugins stay loaded while the model lives
  std::unique_ptr<ModelInstance> model;
  std::filesystem::path source;  // the checkpoint or model folder the weights came from
  int64_t step = -1;             // the checkpoint's step; -1 for a Hugging Face folder
  int64_t seq_len = 0;           // the longest input the model was built for: its [model] seq_len
                                 // option where it has one; 0: unknown
  bool hugging_face_folder = false;
  AdapterSettings adapters;  // the run's [lora]; enabled = false without adapters
};

// `command` names the caller in messages ("export", "generate"). allow_hf_folder: accept a
// Hugging Face folder too. Throws usage Failures naming what the path is not.
std::unique_ptr<RebuiltModel> rebuild_model(const std::filesystem::path& source, const std::string& command,
                                            bool allow_hf_folder);

}  // namespace loom
