// host_tables.hpp: the manifest tables the host reads itself, one declaration each
// (host_tables.cpp). Their defaults are the settings structs' initializers.
#pragma once

#include <vector>

#include "checkpoint/checkpoint_settings.hpp"
#include "config/host_table.hpp"
#include "train/run_plan.hpp"

namespace loom {

// The host-side option of every [[trackers]] entry (the tracker's own options go to its slot).
struct TrackerSettings {
  bool required = false;
  bool every_rank = false;  // created and called on every rank, not only rank 0
};

const HostTable<RunSettings>& run_table();
const HostTable<CheckpointSettings>& checkpoint_table();
const HostTable<TrackerSettings>& tracker_table();
const HostTable<EvalSettings>& eval_data_table();
const HostTable<ModelInitSettings>& model_table();
const HostTable<DistributedSettings>& distributed_table();
const HostTable<AdapterSettings>& lora_table();
const HostTable<ExportSettings>& export_table();

// Every host table, in README order: what `host describe` lists.
std::vector<HostTableDoc> host_table_docs();

}  // namespace loom
