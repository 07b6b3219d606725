#include "train/tensor_parallel_checkpoint.hpp"

#include "base/failure.hpp"
#include "checkpoint/tensor_pieces.hpp"
#include "train/frozen_params.hpp"

namespace loom {
namespace {

const std::string kModel = "model/", kOptimizer = "optimizer/";

formats::TensorSplits splits_of(Pipeline& p) {
  formats::TensorSplits out;
  for (const ModelParam& param : p.model.params())
    if (param.split.dim >= 0) out[param.name] = param.split;
  return out;
}

// The group's pieces of `piece` (every rank's, in rank order) made whole.
at::Tensor gather_whole(const at::Tensor& piece, const formats::TensorSplit& split, Communicator& group,
                        const std::string& name) {
  const int64_t ranks = group.world_size();
  const at::Tensor flat = piece.contiguous().reshape({-1});
  at::Tensor all = at::empty({ranks * flat.numel()}, flat.options());
  all.narrow(0, group.rank() * flat.numel(), flat.numel()).copy_(flat);
  group.allgather_chunks(all);
  std::vector<at::Tensor> pieces;
  for (const at::Tensor& chunk : all.chunk(ranks)) pieces.push_back(chunk.view(piece.sizes()));
  return formats::join_pieces(pieces, split, name);
}

// Which optimizer state follows which group of the flat buffers, by tensor name.
std::map<std::string, size_t> elementwise_states(Pipeline& p) {
  std::map<std::string, size_t> out;
  for (const auto& st : p.optimizer.state())
    if (st.elementwise_group >= 0) out[kOptimizer + st.name] = static_cast<size_t>(st.elementwise_group);
  return out;
}

}  // namespace

void gather_whole_tensors(Snapshot& s, Pipeline& p, Communicator& tensor_group, const SegmentTables* layout) {
  const auto split = splits_of(p);
  const auto states = elementwise_states(p);
  const SegmentTables tables = layout ? *layout : p.flat.segment_tables();
  const formats::TensorSplit stacked{0, 1};  // flat buffers, one per rank
  for (auto& [name, t] : s.tensors) {
    if (name.rfind(kModel, 0) == 0) {
      if (const auto it = split.find(name.substr(kModel.size())); it != split.end())
        t = gather_whole(t, it->second, tensor_group, name);
      continue;
    }
    const auto group = states.find(name);
    if (group == states.end()) continue;
    std::vector<SegmentShape> segments;
    for (const auto& seg : tables.at(group->second)) segments.push_back({seg.name, seg.offset, seg.numel, seg.shape});
    t = join_flat_pieces(gather_whole(t.unsqueeze(0), stacked, tensor_group, name).unbind(0), segments, split);
  }
}

std::map<std::string, at::Tensor> gather_split_params(Pipeline& p, Communicator& tensor_group,
                                                      std::map<std::string, at::Tensor> elsewhere) {
  std::map<std::string, at::Tensor> out = elsewhere;
  for (const ModelParam& param : p.model.params()) {
    if (param.split.dim < 0) continue;
    const auto other = elsewhere.find(param.name);
    if (param.elsewhere && other == elsewhere.end()) continue;  // a layer this stage neither runs nor received
    const at::Tensor piece = param.elsewhere ? other->second : param.tensor->detach();
    out[param.name] = gather_whole(piece, param.split, tensor_group, param.name);
  }
  return out;
}

at::Tensor whole_param(const ModelParam& param, Communicator& tensor_group) {
  return gather_whole(param.tensor->detach(), param.split, tensor_group, param.name);
}

void use_whole_frozen_checksum(Pipeline& p, Communicator& tensor_group) {
  std::vector<ModelParam> params = p.model.params();
  std::vector<at::Tensor> whole;  // the gathered tensors the copies below point at
  whole.reserve(params.size());
  std::set<std::string> frozen;
  for (ModelParam& param : params) {
    if (!param.frozen) continue;
    frozen.insert(param.name);
    if (param.split.dim < 0) continue;
    whole.push_back(gather_whole(param.tensor->detach(), param.split, tensor_group, param.name));
    param.tensor = &whole.back();
  }
  if (frozen.empty()) return;
  std::string checksum = frozen_checksum(params, frozen);
  p.model.set_frozen(std::move(frozen), std::move(checksum));
}

nlohmann::json tensor_parallel_part(Pipeline& p, int tensor_rank, int tensor_size) {
  return {{"size", tensor_size}, {"rank", tensor_rank}, {"split", splits_json(splits_of(p))}};
}

LoadedCheckpoint cut_into_pieces(const LoadedCheckpoint& whole, Pipeline& p, int tensor_rank, int tensor_size,
                                 const std::string& origin, const SegmentTables* layout) {
  const auto split = splits_of(p);
  const auto states = elementwise_states(p);
  const SegmentTables tables = layout ? *layout : p.flat.segment_tables();
  const auto piece_of = [&](const at::Tensor& t, const formats::TensorSplit& cut, const std::string& name) {
    if (!formats::splits_evenly(t, cut, tensor_size))
      throw runtime_failure(origin + ": \"" + name + "\" cannot be cut into " + std::to_string(tensor_size) +
                            " pieces along dimension " + std::to_string(cut.dim) + "; resume with the manifest that wrote it");
    return formats::piece_of(t, cut, tensor_rank, tensor_size, name);
  };
  LoadedCheckpoint out = whole;
  for (auto& [name, t] : out.tensors) {
    if (name.rfind(kModel, 0) == 0) {
      if (const auto it = split.find(name.substr(kModel.size())); it != split.end()) t = piece_of(t, it->second, name);
      continue;
    }
    const auto group = states.find(name);
    if (group == states.end()) continue;
    std::vector<at::Tensor> pieces;
    int64_t offset = 0;  // in the whole layout
    for (const auto& seg : tables.at(group->second)) {
      const auto it = split.find(seg.name);
      std::vector<int64_t> shape = seg.shape;
      if (it != split.end()) shape[static_cast<size_t>(it->second.dim)] *= tensor_size;
      const int64_t numel = seg.numel * (it == split.end() ? 1 : tensor_size);
      if (t.dim() != 1 || offset + numel > t.numel())
        throw runtime_failure(origin + ": \"" + name + "\" holds " + std::to_string(t.numel()) +
                              " elements, fewer than this model's parameters; resume with the manifest that wrote it");
      const at::Tensor segment = t.narrow(0, offset, numel).view(shape);
      pieces.push_back(it == split.end() ? segment.reshape({-1}) : piece_of(segment, it->second, name).reshape({-1}));
      offset += numel;
    }
    if (offset != t.numel())
      throw runtime_failure(origin + ": \"" + name + "\" holds " + std::to_string(t.numel()) + " elements, but this "
                            "model's parameters are " + std::to_string(offset) + "; resume with the manifest that wrote it");
    t = at::cat(pieces);
  }
  return out;
}

}  // namespace loom
