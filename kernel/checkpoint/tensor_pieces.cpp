#include "checkpoint/tensor_pieces.hpp"

#include <stdexcept>

namespace loom {
int64_t json_integer(const nlohmann::json& value, const std::string& what) {
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw std::runtime_error(what + " is out of range");
  if (!value.is_number_integer()) throw std::runtime_error(what + " is not an integer: " + value.dump());
  return value.get<int64_t>();
}

std::vector<int64_t> json_integers(const nlohmann::json& values, const std::string& what) {
  if (!values.is_array()) throw std::runtime_error(what + " is not a list of integers");
  std::vector<int64_t> out;
  for (const auto& v : values) out.push_back(json_integer(v, what));
  return out;
}

nlohmann::json splits_json(const formats::TensorSplits& splits) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, split] : splits)
    out[name] = split.blocks == 1 ? nlohmann::json(split.dim) : nlohmann::json{{"dim", split.dim}, {"blocks", split.blocks}};
  return out;
}

formats::TensorSplits splits_from_json(const nlohmann::json& split) {
  if (!split.is_object()) throw std::runtime_error("the split is not an object of parameters");
  formats::TensorSplits out;
  for (const auto& [name, how] : split.items()) {
    formats::TensorSplit& s = out[name];
    if (how.is_object()) {
      s.dim = json_integer(how.at("dim"), "the split dimension of " + name);
      s.blocks = json_integer(how.at("blocks"), "the split blocks of " + name);
    } else {
      s.dim = json_integer(how, "the split dimension of " + name);
    }
    if (s.dim < 0 || s.blocks < 1) throw std::runtime_error("the split of " + name + " is " + how.dump());
  }
  return out;
}

at::Tensor join_flat_pieces(const std::vector<at::Tensor>& flats, const std::vector<SegmentShape>& segments,
                            const formats::TensorSplits& split) {
  if (flats.empty()) throw std::runtime_error("no pieces to join");
  for (const at::Tensor& flat : flats)
    if (flat.dim() != 1 || flat.scalar_type() != flats.front().scalar_type())
      throw std::runtime_error("the flat buffers to join are not 1-D of one dtype");
  std::vector<at::Tensor> whole;
  for (const SegmentShape& seg : segments) {
    int64_t shape_numel = 1;
    for (const int64_t d : seg.shape) {
      if (d < 0 || (d > 0 && shape_numel > INT64_MAX / d)) throw std::runtime_error("the shape of \"" + seg.name + "\"");
      shape_numel *= d;
    }
    if (seg.numel != shape_numel) throw std::runtime_error("\"" + seg.name + "\": its shape is not its size");
    for (const at::Tensor& flat : flats)
      if (seg.offset < 0 || seg.offset > flat.numel() - seg.numel)
        throw std::runtime_error("segment \"" + seg.name + "\" lies outside a flat buffer of " +
                                 std::to_string(flat.numel()) + " elements");
    const auto it = split.find(seg.name);
    if (it == split.end()) {
      whole.push_back(flats.front().narrow(0, seg.offset, seg.numel));
      continue;
    }
    std::vector<at::Tensor> pieces;
    for (const at::Tensor& flat : flats) pieces.push_back(flat.narrow(0, seg.offset, seg.numel).view(seg.shape));
    whole.push_back(formats::join_pieces(pieces, it->second, seg.name).reshape({-1}));
  }
  if (whole.empty()) return flats.front().new_empty({0});
  return at::cat(whole);
}

namespace {

TensorsByName join_sets(const std::vector<TensorsByName>& sets, const nlohmann::json& metadata) {
  if (sets.empty()) throw std::runtime_error("no tensor rank's parts");
  const formats::TensorSplits split = splits_from_json(metadata.at("tensor_parallel").at("split"));
  const nlohmann::json& layout = metadata.at("shard");
  std::map<std::string, std::vector<SegmentShape>> elementwise;  // "optimizer/<state>" -> its group's segments
  const nlohmann::json& groups = layout.at("groups");
  for (const auto& [state, group] : layout.at("elementwise").items()) {
    const int64_t g = json_integer(group, "the group of state " + state);
    if (g < 0 || static_cast<size_t>(g) >= groups.size())
      throw std::runtime_error("state \"" + state + "\" follows group " + group.dump());
    std::vector<SegmentShape>& segments = elementwise["optimizer/" + state];
    for (const auto& seg : groups.at(static_cast<size_t>(g)).at("segments")) {
      const std::string name = seg.at(0).get<std::string>();
      segments.push_back({name, json_integer(seg.at(1), "the offset of " + name),
                          json_integer(seg.at(2), "the size of " + name), json_integers(seg.at(3), "the shape of " + name)});
    }
  }
  const auto pieces_of = [&](const std::string& name) {
    std::vector<at::Tensor> pieces;
    for (const TensorsByName& set : sets) {
      const auto it = set.find(name);
      if (it == set.end()) throw std::runtime_error("a tensor rank's parts have no " + name);
      pieces.push_back(it->second);
    }
    return pieces;
  };
  TensorsByName out = sets.front();
  for (auto& [name, t] : out) {
    if (name.rfind("model/", 0) == 0) {
      if (const auto it = split.find(name.substr(6)); it != split.end()) t = formats::join_pieces(pieces_of(name), it->second, name);
      continue;
    }
    if (const auto it = elementwise.find(name); it != elementwise.end())
      t = join_flat_pieces(pieces_of(name), it->second, split);
  }
  return out;
}

}  // namespace

TensorsByName join_tensor_sets(const std::vector<TensorsByName>& sets, const nlohmann::json& metadata) {
  try {
    return join_sets(sets, metadata);
  } catch (const nlohmann::json::exception& e) {  // a field missing or of another type
    throw std::runtime_error(std::string("its metadata does not describe a tensor-parallel save: ") + e.what());
  }
}

}  // namespace loom
