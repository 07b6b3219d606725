// run_plan.hpp: everything the trainer needs to run, as config/plan.cpp resolved it from the
// manifest: host settings (defaults live in these structs, once) and, per slot, the chosen
// component with its validated options. Plain data: no TOML, no manifest positions beyond
// the ones kept for messages.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "abi/instance.hpp"
#include "abi/registry.hpp"
#include "checkpoint/checkpoint_settings.hpp"
#include "train/precision.hpp"

namespace loom {

// [run]
struct RunSettings {
  std::string name = "run", dir = "runs";
  int64_t seed = 0;
  int64_t steps = 100;
  int64_t epochs = 0;               // > 0: train this many epochs instead of `steps`
  std::string device = "auto";      // resolved per rank by resolve_device (train/device.hpp)
  std::string device_at = "[run]";  // where the manifest set it, for error messages
  Precision precision = Precision::fp32;
  bool deterministic = false;
  int64_t grad_accum = 1;
  int64_t global_batch_size = 0;    // rows per optimizer step over all ranks; 0: use grad_accum
  double clip_grad_norm = 1.0;      // 0: no clipping
  int64_t log_every = 10;
  int64_t threads = 0;              // 0: the usable CPUs / ranks on this machine (base/cpu_threads.hpp)
  bool low_priority_helpers = true;  // helper threads give way to the step
  bool cpu_memory_cache = true;
  double peak_flops = 0.0;          // 0: measure
  double gpu_memory_gib = 0.0;      // CUDA's caching allocator capped at this (train/factories.cpp); 0: no cap
  bool cuda_graph = false;          // micro-batches replayed as CUDA graphs (train/micro_batch_graphs.hpp)
};

// [distributed]: how ranks talk (the ranks themselves come from the launcher's variables).
struct DistributedSettings {
  std::string backend = "auto";  // "auto", "gloo" or "nccl"
  double bucket_mb = 25;         // gradient all-reduce bucket size
  double timeout_s = 300;        // a rank that does not answer within this fails the run
  std::string shard = "none";    // "none", "optimizer" (ZeRO-1) or "gradients" (ZeRO-2)
  int64_t tensor_parallel = 1;   // ranks per tensor-parallel group (train/tensor_parallel_trainer.hpp)
  int64_t sequence_parallel = 1; // ranks per sequence-parallel group (dist/device_mesh.hpp)
  int64_t context_parallel = 1;  // ranks per context-parallel group, the same mesh axis (ring attention)
  int64_t expert_parallel = 1;   // data-parallel ranks per expert-parallel group (train/mesh_groups.hpp)
  int64_t pipeline_parallel = 1;        // pipeline stages (train/stage_runner.hpp)
  std::string pipeline_schedule = "1f1b";  // "gpipe", "1f1b" or "interleaved_1f1b" (dist/stage_schedule.hpp)
  int64_t pipeline_chunks = 1;          // model chunks per stage (interleaved_1f1b)
  double pipeline_embedding_cost = 0;   // the cut's weights, in layers (dist/stage_layers.hpp)
  double pipeline_head_cost = 1;
  std::vector<std::string> pipeline_split_points;  // "layers.N": a listed cut instead of the cost's
  std::string sparse_tables = "replicated";  // or "row_sharded" (train/sparse_table_updates.hpp)
  std::string offload = "none";  // or "optimizer" (train/optimizer_offload.hpp)
  double offload_piece_mb = 64;  // what the offloaded update copies and updates at once
};

// [export]: Hugging Face folders written during training (XTuner's hf_interval).
struct ExportSettings {
  bool enabled = false;                // the manifest has an [export] table
  int64_t every = 0;                   // steps between exports; 0: only at_end
  int64_t keep = 0;                    // newest folders kept; 0: all
  bool at_end = true;                  // export after the last step
  std::string dir = "hf";              // under the run folder, unless absolute
  std::string dtype = "bf16";          // bf16, fp16 or fp32
  std::string max_shard_size = "5GB";  // largest weights file
};

// [model]'s host-side options (the model's own options go to its slot).
struct ModelInitSettings {
  std::string init_from;    // a Hugging Face folder or a Loom checkpoint; empty: the model's own init
  bool init_strict = true;  // refuse weights that do not fit every parameter
  std::vector<std::string> freeze;    // name patterns of parameters that do not train
  std::string frozen_dtype = "fp32";  // "fp32" or "bf16" (with run.precision = "bf16")
};

// [eval_data]'s host-side option (the dataset's own options go to its slot).
struct EvalSettings {
  int64_t max_batches = 50;
};

struct RunPlan {
  RunSettings run;
  DistributedSettings distributed;
  CheckpointSettings checkpoint;
  EvalSettings eval;
  ModelInitSettings model_init;
  AdapterSettings lora;                 // [lora]: LoRA adapters; the base then stays frozen
  ExportSettings hf_export;
  SlotConfig model, data, optimizer, schedule;
  SlotConfig sparse_optimizer;          // component null without [sparse_optimizer]: updates the
                                        // model's sparse tables (LOOM_PARAM_FLAG_SPARSE_ROWS)
  SlotConfig checkpoint_backend;        // component null without [checkpoint]
  SlotConfig eval_data;                 // component null without [eval_data]; read when a hook
                                        // requests evaluation
  std::vector<SlotConfig> trackers, hooks;
  std::string resolved_manifest;        // TOML, every default filled in; written to the run directory
  const Registry* registry = nullptr;   // what resolved it; lives as long as the run
  // Compares the resolved manifest a checkpoint was written with against this run's: returns
  // the harmless differences ("key: old -> new"), throws a usage Failure for a breaking one.
  // Supplied by config (it knows which keys change the math), called by the trainer on resume.
  // The world sizes let a resume on another number of ranks regroup the same rows per step.
  std::function<std::vector<std::string>(const std::string& saved, const std::string& checkpoint, int saved_world,
                                         int current_world)>
      manifest_changes;
};

}  // namespace loom
