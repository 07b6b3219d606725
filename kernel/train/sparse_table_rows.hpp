// sparse_table_rows.hpp: row-sharded sparse tables in checkpoints ([distributed] sparse_tables =
// "row_sharded", ABI 1.14). A checkpoint holds every table and the [sparse_optimizer]'s per-row
// state (add_row_state) whole, in one process's layout, so it resumes at any rank count and
// with replicated tables, and `checkpoint inspect`, `host export` and `host eval` read it as any
// other. Rank 0 receives every rank's rows (one broadcast per rank and tensor: no other rank
// holds more than its own rows and one rank's piece); a resume cuts each rank's rows out again.
#pragma once

#include <string>

#include "abi/checkpoint_backend.hpp"
#include "checkpoint/snapshot.hpp"
#include "dist/communicator.hpp"
#include "train/pipeline.hpp"

namespace loom {

// The first row rank `rank` of `ranks` holds of a table of `rows` rows: the split
// <loom/sparse_tables.hpp> makes (rows * rank / ranks).
int64_t first_held_row(int64_t rows, int64_t rank, int64_t ranks);

// Every rank calls it, in step; rank 0 passes its snapshot (the others nullptr), whose tables
// and per-row state then hold every rank's rows in rank order.
void gather_table_rows(Snapshot* snapshot, Pipeline& p, Communicator& comm);

// At resume: the whole tables and per-row state in `loaded` replaced by this rank's rows.
void cut_table_rows(LoadedCheckpoint& loaded, Pipeline& p, int rank, int ranks, const std::string& origin);

}  // namespace loom
