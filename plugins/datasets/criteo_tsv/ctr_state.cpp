// ctr_state.cpp: the criteo_tsv resume record (ctr_state.hpp).
#include "ctr_state.hpp"

#include <cstring>

#include "plugins/datasets/common/data_error.hpp"
#include "plugins/datasets/common/little_endian.hpp"

namespace loom::criteo {

namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'C', 'T', 'R', 'S'};
constexpr uint32_t kVersion = 1;
const char* const kFresh = "; resume with the data and options that wrote the checkpoint, or start a fresh run";

}  // namespace

std::string encode_state(const SavedState& s) {
  using loom::data::append_le;
  std::string out(kMagic, sizeof kMagic);
  append_le<uint32_t>(out, kVersion);
  append_le<uint32_t>(out, s.rank);
  append_le<uint32_t>(out, s.world_size);
  append_le<uint32_t>(out, s.window_end_due ? 1 : 0);
  for (uint64_t v : {s.batch_size, s.window_rows, s.file_count, s.position.pass, s.position.file, s.position.offset,
                     s.position.line_in_file, s.position.line_in_pass, s.position.line_in_window, s.windows_ended,
                     s.padding_due})
    append_le<uint64_t>(out, v);
  return out;
}

SavedState decode_state(const std::string& bytes) {
  using loom::data::bad_input;
  using loom::data::load_le;
  if (bytes.size() != kStateBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw bad_input("criteo_tsv: the saved dataset state is not a criteo_tsv record (" + std::to_string(bytes.size()) +
                    " bytes, expected " + std::to_string(kStateBytes) + " starting with \"LOOMCTRS\")" + kFresh);
  const char* p = bytes.data() + sizeof kMagic;
  const uint32_t version = load_le<uint32_t>(p);
  if (version != kVersion)
    throw bad_input("criteo_tsv: the saved dataset state has version " + std::to_string(version) +
                    ", this build reads version " + std::to_string(kVersion) + kFresh);
  SavedState s;
  s.rank = load_le<uint32_t>(p + 4);
  s.world_size = load_le<uint32_t>(p + 8);
  const uint32_t due = load_le<uint32_t>(p + 12);
  if (due > 1) throw bad_input("criteo_tsv: the saved dataset state has a window flag of " + std::to_string(due) + kFresh);
  s.window_end_due = due == 1;
  uint64_t* fields[] = {&s.batch_size,          &s.window_rows,           &s.file_count,
                        &s.position.pass,       &s.position.file,         &s.position.offset,
                        &s.position.line_in_file, &s.position.line_in_pass, &s.position.line_in_window,
                        &s.windows_ended,         &s.padding_due};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i) *fields[i] = load_le<uint64_t>(p + 16 + 8 * i);
  return s;
}

}  // namespace loom::criteo
