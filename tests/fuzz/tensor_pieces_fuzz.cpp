// tensor_pieces_fuzz.cpp: the joining of a tensor-parallel run's sharded checkpoint,
// kernel/checkpoint/tensor_pieces.hpp join_tensor_sets (what sharded_checkpoint.cpp does once
// each tensor rank's parts are read).
//
// The input is the metadata JSON of tensor rank 0's parts ("tensor_parallel" and "shard"). The
// target makes the tensors that metadata describes, as a reader would find them (capped at
// 4096 elements each): each segment as model/<name> and each group's elementwise state as a
// flat buffer of the group's numel, the same for every one of min(size, 3) tensor ranks.
// Documented refusal: std::runtime_error. A join that succeeds must give every split
// parameter its pieces' total along the split dimension, and a split in blocks rank 0's
// piece of each block at the block's start.
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

#include "checkpoint/tensor_pieces.hpp"
#include "fuzz_support.hpp"

namespace {

constexpr int64_t kMaxElements = 4096;

bool small_shape(const nlohmann::json& shape) {
  if (!shape.is_array() || shape.size() > 4) return false;
  int64_t n = 1;
  for (const auto& d : shape) {
    if (!d.is_number_integer() || d.is_number_unsigned() || d.get<int64_t>() < 0 || d.get<int64_t>() > kMaxElements)
      return false;
    n *= d.get<int64_t>();
    if (n > kMaxElements) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json metadata = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (metadata.is_discarded() || !metadata.is_object()) return 0;
  loom::TensorsByName set;
  int ranks = 2;
  try {  // what the metadata describes, where it is plausible enough to make
    ranks = static_cast<int>(std::clamp<int64_t>(loom::json_integer(metadata.at("tensor_parallel").at("size"), "size"), 1, 3));
    for (const auto& group : metadata.at("shard").at("groups"))
      for (const auto& seg : group.at("segments"))
        if (seg.at(0).is_string() && small_shape(seg.at(3)))
          set["model/" + seg.at(0).get<std::string>()] = at::randn(seg.at(3).get<std::vector<int64_t>>());
    for (const auto& [state, g] : metadata.at("shard").at("elementwise").items()) {
      const int64_t group = loom::json_integer(g, "group");
      if (group < 0) continue;
      const int64_t numel = loom::json_integer(metadata.at("shard").at("groups").at(static_cast<size_t>(group)).at("numel"), "numel");
      if (numel >= 0 && numel <= kMaxElements) set["optimizer/" + state] = at::randn({numel});
    }
  } catch (const nlohmann::json::exception&) {  // then only what was made so far
  } catch (const std::runtime_error&) {
  }
  const std::vector<loom::TensorsByName> sets(static_cast<size_t>(ranks), set);
  loom_fuzz::expect_only<std::runtime_error>("join_tensor_sets", [&] {
    const loom::TensorsByName whole = loom::join_tensor_sets(sets, metadata);
    for (const auto& [name, split] : loom::splits_from_json(metadata.at("tensor_parallel").at("split"))) {
      const auto it = whole.find("model/" + name);
      if (it == whole.end()) continue;
      const at::Tensor& piece = set.at("model/" + name);
      if (it->second.size(split.dim) != piece.size(split.dim) * ranks)
        loom_fuzz::finding("\"" + name + "\" joined to the wrong size");
      if (split.blocks > 1) {  // each block's first piece comes from rank 0: block b starts at b * len / blocks
        const int64_t n = piece.size(split.dim) / split.blocks, len = it->second.size(split.dim);
        for (int64_t b = 0; b < split.blocks; ++b)
          if (!it->second.narrow(split.dim, b * len / split.blocks, n).equal(piece.narrow(split.dim, b * n, n)))
            loom_fuzz::finding("\"" + name + "\" block " + std::to_string(b) + " joined out of place");
      }
    }
    loom_fuzz::keep(whole.size());
  });
  return 0;
}
