// stream_state.hpp: the `parquet` dataset's resume record, kept in checkpoints: a rank's
// DocumentStream position and what must match for it to mean the same windows. Little-endian:
//   "LOOMPQS1" | u32 rank | u32 world_size | u32 shuffle (0 or 1) | u32 0 | u64 seed | u64 seq_len
//   | u64 layout digest (the files' parts and rows) | u64 epoch | u64 block | u64 window
//   | u64 carry length (at most seq_len) | carry ids, u32 each
// A checkpoint is untrusted input: decode checks the shape and every field against this run, the
// stream then the position against its units. Torch-free, SDK-free.
#pragma once

#include <cstring>
#include <string>

#include "plugins/datasets/common/data_error.hpp"
#include "plugins/datasets/common/little_endian.hpp"
#include "plugins/datasets/parquet/document_stream.hpp"

namespace loom::parquet_data {

struct StateCheck {
  uint32_t rank = 0, world_size = 1;
  bool shuffle = true;
  uint64_t seed = 0, seq_len = 0, digest = 0;
};

inline constexpr char kStateMagic[8] = {'L', 'O', 'O', 'M', 'P', 'Q', 'S', '1'};
inline constexpr size_t kStateFixedBytes = 8 + 16 + 24 + 32;

inline std::string encode_state(const StateCheck& c, const StreamPosition& p) {
  std::string s(kStateMagic, sizeof kStateMagic);
  data::append_le<uint32_t>(s, c.rank);
  data::append_le<uint32_t>(s, c.world_size);
  data::append_le<uint32_t>(s, c.shuffle ? 1 : 0);
  data::append_le<uint32_t>(s, 0);
  for (const uint64_t v : {c.seed, c.seq_len, c.digest, p.epoch, p.block, p.window, uint64_t(p.carry.size())})
    data::append_le<uint64_t>(s, v);
  for (const int32_t id : p.carry) data::append_le<uint32_t>(s, uint32_t(id));
  return s;
}

// The position in `s`; throws a bad_input DataError when s is not such a record or was written
// under another configuration than `now`.
inline StreamPosition decode_state(const std::string& s, const StateCheck& now) {
  const std::string fresh = "; resume with the data and [data] options that wrote the checkpoint, or start a fresh run";
  if (s.size() < kStateFixedBytes || std::memcmp(s.data(), kStateMagic, sizeof kStateMagic) != 0)
    throw data::bad_input("the saved data position is not a parquet dataset record" + fresh);
  const char* p = s.data() + sizeof kStateMagic;
  const auto u32 = [&](size_t at) { return data::load_le<uint32_t>(p + at); };
  const auto u64 = [&](size_t at) { return data::load_le<uint64_t>(p + at); };
  const auto differs = [&](const char* what, uint64_t then, uint64_t want, const char* fix) {
    if (then != want)
      throw data::bad_input(std::string("the saved data position was written with ") + what + " " + std::to_string(then) +
                            ", this run has " + std::to_string(want) + "; " + fix + fresh);
  };
  differs("world size", u32(4), now.world_size,
          "a streamed corpus resumes on the number of ranks that saved it (each rank's share is its own)");
  differs("rank", u32(0), now.rank, "each rank loads its own position");
  differs("shuffle", u32(8), now.shuffle ? 1 : 0, "set the same [data] shuffle");
  if (u32(12) != 0) throw data::bad_input("the saved data position has a reserved field set; it is damaged" + fresh);
  differs("seed", u64(16), now.seed, "set the same run.seed");
  differs("seq_len", u64(24), now.seq_len, "set the same [data] seq_len");
  differs("data layout digest", u64(32), now.digest, "the files or their row groups changed since; restore them");
  StreamPosition out;
  out.epoch = u64(40);
  out.block = u64(48);
  out.window = u64(56);
  const uint64_t carry = u64(64);
  if (carry > now.seq_len || s.size() != kStateFixedBytes + 4 * carry)
    throw data::bad_input("the saved data position has " + std::to_string(s.size()) + " bytes, not what its carry length says" + fresh);
  for (uint64_t i = 0; i < carry; ++i) {
    const uint32_t id = data::load_le<uint32_t>(s.data() + kStateFixedBytes + 4 * i);
    if (id > uint32_t(INT32_MAX)) throw data::bad_input("the saved data position carries a token id above 2^31 - 1; it is damaged" + fresh);
    out.carry.push_back(int32_t(id));
  }
  return out;
}

}  // namespace loom::parquet_data
