// ctr_state.hpp: the criteo_tsv resume record kept in checkpoints. It holds the stream position
// and what must match for that position to mean the same batches (rank, world size, batch_size,
// window_rows, the number of files). Fixed size, little-endian:
//   "LOOMCTRS" | u32 version (1) | u32 rank | u32 world_size | u32 window_end_due (0 or 1)
//   | u64 batch_size | u64 window_rows | u64 file_count
//   | u64 pass, file, offset, line_in_file, line_in_pass, line_in_window | u64 windows_ended
//   | u64 padding_due
// A position all ranks share (inside a window after the same whole batches on every rank, or
// between windows) is written the same by every rank, with world_size kAnyWorldSize, rank 0 and
// batch_size 0: it resumes at any rank count whose ranks can have read its lines in whole
// batches (the same global batch always can).
// A checkpoint file is untrusted input: decode_state checks the shape, the plugin the values
// (TsvStream::seek checks the position against the files). Torch-free, SDK-free.
#pragma once

#include <cstdint>
#include <string>

#include "tsv_stream.hpp"

namespace loom::criteo {

struct SavedState {
  uint32_t rank = 0, world_size = 1;
  bool window_end_due = false;  // a window ended after the last batch; its end is not reported yet
  uint64_t batch_size = 0, window_rows = 0, file_count = 0;
  StreamPosition position;
  uint64_t windows_ended = 0;  // window ends reported so far
  uint64_t padding_due = 0;    // empty batches (0 or 1) owed before the pending window end
};

inline constexpr size_t kStateBytes = 112;
inline constexpr uint32_t kAnyWorldSize = 0;

std::string encode_state(const SavedState& s);
// Throws a bad_input DataError for a record of the wrong size, magic, version or flag value.
SavedState decode_state(const std::string& bytes);

}  // namespace loom::criteo
