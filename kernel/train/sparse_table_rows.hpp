// sparse_table_rows.hpp: row-sharded sparse tables in checkpoints ([distributed] sparse_tables =
// "row_sharded", ABI 1.14). Every rank writes its own rows of each table and of the
// [sparse_optimizer]'s per-row state (add_row_state) into its part of the checkpoint
// (checkpoint/row_parts.hpp), so no rank holds more than its rows to save them. Reading puts
// the rows together: whole for `checkpoint inspect`, `host export` and `host eval`, or at a
// resume only the rows each rank holds, at any rank count and with replicated tables.
#pragma once

#include <string>

#include "abi/checkpoint_backend.hpp"
#include "checkpoint/snapshot.hpp"
#include "dist/communicator.hpp"
#include "train/pipeline.hpp"

namespace loom {

// Every rank calls it, in step, with its part: rank 0's made by capture_snapshot (the dense
// weights, optimizer and run state), the others' empty. The part then holds this rank's rows of
// every table and per-row state under shard/rows/<name>, and metadata saying which rows.
void make_table_row_part(Snapshot& part, Pipeline& p, Communicator& comm);

// At resume: the tables and per-row state in `loaded` as this rank's rows (cut out of whole
// tensors here, unless the reader read only those rows).
void cut_table_rows(LoadedCheckpoint& loaded, Pipeline& p, int rank, int ranks, const std::string& origin);

}  // namespace loom
