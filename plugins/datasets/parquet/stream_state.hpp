// stream_state.hpp: the `parquet` dataset's resume record, kept in checkpoints: a rank's
// DocumentStream position and what must match for it to mean the same windows. Little-endian:
//   "LOOMPQS2" | u32 rank | u32 world_size | u32 shuffle (0 or 1) | u32 0 | u64 seed | u64 seq_len
//   | u64 layout digest (the files' parts and rows) | position | u32 S | u32 0 | S x position
// where a position is u64 epoch | u64 block | u64 window | u64 carry length (at most seq_len)
// | carry ids, u32 each, and the S positions are those of a run of another world size this one
// resumed, while this rank still reads its share of what they had left (S = 0 otherwise; a
// "LOOMPQS1" record, from before, ends after the first position).
// A checkpoint is untrusted input: decode checks the shape and every field against this run, the
// stream then the positions against its units. Torch-free, SDK-free.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "plugins/datasets/common/data_error.hpp"
#include "plugins/datasets/common/little_endian.hpp"
#include "plugins/datasets/parquet/document_stream.hpp"

namespace loom::parquet_data {

struct StateCheck {
  uint32_t rank = 0, world_size = 1;
  bool shuffle = true;
  uint64_t seed = 0, seq_len = 0, digest = 0;
};

struct SavedState {
  StreamPosition position;
  std::vector<StreamPosition> saved_world;  // see DocumentStream::saved_world()
};

inline constexpr char kStateMagic[8] = {'L', 'O', 'O', 'M', 'P', 'Q', 'S', '2'};
inline constexpr char kStateMagicV1[8] = {'L', 'O', 'O', 'M', 'P', 'Q', 'S', '1'};
inline constexpr size_t kStateHeaderBytes = 8 + 16 + 24;
// No run reads 2^40 epochs; a record that says so is damaged (and epoch + 1 must not wrap).
inline constexpr uint64_t kMaxEpoch = uint64_t(1) << 40;

inline void encode_position(std::string& s, const StreamPosition& p) {
  for (const uint64_t v : {p.epoch, p.block, p.window, uint64_t(p.carry.size())}) data::append_le<uint64_t>(s, v);
  for (const int32_t id : p.carry) data::append_le<uint32_t>(s, uint32_t(id));
}

inline std::string encode_state(const StateCheck& c, const StreamPosition& p, const std::vector<StreamPosition>& saved_world) {
  std::string s(kStateMagic, sizeof kStateMagic);
  data::append_le<uint32_t>(s, c.rank);
  data::append_le<uint32_t>(s, c.world_size);
  data::append_le<uint32_t>(s, c.shuffle ? 1 : 0);
  data::append_le<uint32_t>(s, 0);
  for (const uint64_t v : {c.seed, c.seq_len, c.digest}) data::append_le<uint64_t>(s, v);
  encode_position(s, p);
  data::append_le<uint32_t>(s, uint32_t(saved_world.size()));
  data::append_le<uint32_t>(s, 0);
  for (const StreamPosition& q : saved_world) encode_position(s, q);
  return s;
}

// The positions in `s`; throws a bad_input DataError when s is not such a record or was written
// under another configuration than `now`.
inline SavedState decode_state(const std::string& s, const StateCheck& now) {
  const std::string fresh = "; resume with the data and [data] options that wrote the checkpoint, or start a fresh run";
  const bool v1 = s.size() >= kStateHeaderBytes && std::memcmp(s.data(), kStateMagicV1, sizeof kStateMagicV1) == 0;
  if (s.size() < kStateHeaderBytes || (!v1 && std::memcmp(s.data(), kStateMagic, sizeof kStateMagic) != 0))
    throw data::bad_input("the saved data position is not a parquet dataset record" + fresh);
  size_t at = sizeof kStateMagic;
  const auto take = [&](size_t bytes) -> uint64_t {
    if (s.size() - at < bytes)
      throw data::bad_input("the saved data position ends after " + std::to_string(s.size()) + " bytes, inside a field; it is damaged" + fresh);
    const uint64_t v = bytes == 4 ? data::load_le<uint32_t>(s.data() + at) : data::load_le<uint64_t>(s.data() + at);
    at += bytes;
    return v;
  };
  const auto differs = [&](const char* what, uint64_t then, uint64_t want, const char* fix) {
    if (then != want)
      throw data::bad_input(std::string("the saved data position was written with ") + what + " " + std::to_string(then) +
                            ", this run has " + std::to_string(want) + "; " + fix + fresh);
  };
  const uint64_t rank = take(4);
  differs("world size", take(4), now.world_size, "each rank's share of the data depends on it");
  differs("rank", rank, now.rank, "each rank loads its own position");
  differs("shuffle", take(4), now.shuffle ? 1 : 0, "set the same [data] shuffle");
  if (take(4) != 0) throw data::bad_input("the saved data position has a reserved field set; it is damaged" + fresh);
  differs("seed", take(8), now.seed, "set the same run.seed");
  differs("seq_len", take(8), now.seq_len, "set the same [data] seq_len");
  differs("data layout digest", take(8), now.digest, "the files or their row groups changed since; restore them");
  const auto position = [&] {
    StreamPosition p;
    p.epoch = take(8);
    if (p.epoch >= kMaxEpoch) throw data::bad_input("the saved data position is in epoch " + std::to_string(p.epoch) + "; it is damaged" + fresh);
    p.block = take(8);
    p.window = take(8);
    const uint64_t carry = take(8);
    if (carry > now.seq_len || (s.size() - at) / 4 < carry)
      throw data::bad_input("the saved data position carries " + std::to_string(carry) + " tokens, more than seq_len or its bytes; it is damaged" + fresh);
    for (uint64_t i = 0; i < carry; ++i) {
      const uint64_t id = take(4);
      if (id > uint64_t(INT32_MAX)) throw data::bad_input("the saved data position carries a token id above 2^31 - 1; it is damaged" + fresh);
      p.carry.push_back(int32_t(id));
    }
    return p;
  };
  SavedState out;
  out.position = position();
  if (!v1) {
    const uint64_t saved = take(4);
    if (take(4) != 0) throw data::bad_input("the saved data position has a reserved field set; it is damaged" + fresh);
    if (saved > (s.size() - at) / 32) throw data::bad_input("the saved data position lists more ranks than its bytes hold; it is damaged" + fresh);
    for (uint64_t r = 0; r < saved; ++r) out.saved_world.push_back(position());
  }
  if (at != s.size()) throw data::bad_input("the saved data position has " + std::to_string(s.size() - at) + " bytes after its end; it is damaged" + fresh);
  return out;
}

}  // namespace loom::parquet_data
