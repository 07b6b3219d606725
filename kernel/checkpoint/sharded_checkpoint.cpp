#include "checkpoint/sharded_checkpoint.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <vector>

#include "base/failure.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

struct GroupLayout {
  at::ScalarType dtype;
  int64_t numel = 0;
  nlohmann::json segments;
};

at::ScalarType dtype_named(const std::string& name) {
  for (at::ScalarType t : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16})
    if (name == c10::toString(t)) return t;
  throw std::runtime_error("unknown dtype \"" + name + "\"");
}

// Copies one rank's slice of one whole tensor into place, after checking it fits.
void place(at::Tensor& whole, const at::Tensor& slice, int64_t start, int64_t length,
           const std::string& what) {
  if (start < 0 || length < 0 || start > whole.numel() - length)
    throw std::runtime_error(what + ": slice [" + std::to_string(start) + ", +" + std::to_string(length) +
                             ") lies outside " + std::to_string(whole.numel()) + " elements");
  if (slice.dim() != 1 || slice.numel() != length || slice.scalar_type() != whole.scalar_type())
    throw std::runtime_error(what + " is not a 1-D " + std::string(c10::toString(whole.scalar_type())) + " of " +
                             std::to_string(length) + " elements");
  if (length > 0) whole.narrow(0, start, length).copy_(slice);
}

}  // namespace

std::string rank_folder_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d", rank);
  return name;
}

bool is_sharded_checkpoint(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir / rank_folder_name(0), ec);
}

LoadedCheckpoint read_checkpoint(CheckpointBackendInstance& backend, const fs::path& dir) {
  if (!is_sharded_checkpoint(dir)) return backend.load(dir.string());
  LoadedCheckpoint out = backend.load((dir / rank_folder_name(0)).string());
  const std::string origin = dir.string();
  try {
    const nlohmann::json layout = nlohmann::json::parse(out.metadata_json).at("shard");
    const int world = layout.at("world_size").get<int>();
    if (world < 1 || world > 65536) throw std::runtime_error("world_size " + std::to_string(world));
    std::vector<GroupLayout> groups;
    for (const auto& g : layout.at("groups")) {
      const int64_t numel = g.at("numel").get<int64_t>();
      if (numel < 0 || numel > (int64_t{1} << 40)) throw std::runtime_error("group of " + std::to_string(numel) + " elements");
      groups.push_back({dtype_named(g.at("dtype").get<std::string>()), numel, g.at("segments")});
    }
    std::vector<at::Tensor> params;
    for (const auto& g : groups) params.push_back(at::empty({g.numel}, g.dtype));
    std::map<std::string, at::Tensor> state;  // elementwise optimizer state, whole
    for (const auto& [name, group] : layout.at("elementwise").items()) {
      const size_t g = group.get<size_t>();
      if (g >= groups.size()) throw std::runtime_error("state \"" + name + "\" follows group " + std::to_string(g));
      state[name] = at::empty({groups[g].numel}, groups[g].dtype);
    }
    // Every rank's part, in rank order; its slices must tile each group exactly.
    std::vector<int64_t> next_start(groups.size(), 0);
    for (int rank = 0; rank < world; ++rank) {
      const fs::path folder = dir / rank_folder_name(rank);
      LoadedCheckpoint loaded_part = rank == 0 ? LoadedCheckpoint{} : backend.load(folder.string());
      LoadedCheckpoint& part = rank == 0 ? out : loaded_part;
      const nlohmann::json info = nlohmann::json::parse(part.metadata_json).at("part");
      if (info.at("rank").get<int>() != rank) throw std::runtime_error(folder.string() + " holds another rank's part");
      const auto& slices = info.at("slices");
      if (slices.size() != groups.size()) throw std::runtime_error(folder.string() + ": slices for another layout");
      for (size_t g = 0; g < groups.size(); ++g) {
        const int64_t start = slices[g].at(0).get<int64_t>(), length = slices[g].at(1).get<int64_t>();
        if (start != next_start[g])
          throw std::runtime_error(folder.string() + ": group " + std::to_string(g) + " slice starts at " +
                                   std::to_string(start) + ", expected " + std::to_string(next_start[g]));
        const std::string key = kShardParamsPrefix + std::to_string(g);
        auto it = part.tensors.find(key);
        if (it == part.tensors.end()) throw std::runtime_error(folder.string() + " has no " + key);
        place(params[g], it->second, start, length, folder.string() + " " + key);
        for (const auto& [name, group] : layout.at("elementwise").items()) {
          if (group.get<size_t>() != g) continue;
          auto s = part.tensors.find(kShardOptimizerPrefix + name);
          if (s == part.tensors.end()) throw std::runtime_error(folder.string() + " has no optimizer state " + name);
          place(state[name], s->second, start, length, folder.string() + " " + name);
        }
        next_start[g] = start + length;
      }
      for (auto it = part.tensors.begin(); it != part.tensors.end();)  // the slices are placed
        it = it->first.rfind("shard/", 0) == 0 ? part.tensors.erase(it) : std::next(it);
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      if (next_start[g] != groups[g].numel)
        throw std::runtime_error("the ranks' slices of group " + std::to_string(g) + " cover " +
                                 std::to_string(next_start[g]) + " of " + std::to_string(groups[g].numel) + " elements");
      for (const auto& s : groups[g].segments) {
        const std::string name = s.at(0).get<std::string>();
        const int64_t offset = s.at(1).get<int64_t>(), numel = s.at(2).get<int64_t>();
        const std::vector<int64_t> shape = s.at(3).get<std::vector<int64_t>>();
        int64_t shape_numel = 1;
        for (int64_t d : shape) {
          if (d < 0 || (d > 0 && shape_numel > (int64_t{1} << 40) / d)) throw std::runtime_error("shape of " + name);
          shape_numel *= d;
        }
        if (offset < 0 || numel != shape_numel || offset > groups[g].numel - numel)
          throw std::runtime_error("parameter \"" + name + "\" lies outside its group");
        out.tensors["model/" + name] = params[g].narrow(0, offset, numel).view(shape);
      }
    }
    for (auto& [name, whole] : state) out.tensors["optimizer/" + name] = whole;
  } catch (const Failure&) {
    throw;
  } catch (const std::exception& e) {
    throw runtime_failure(origin + ": unreadable sharded checkpoint: " + e.what() +
                          "; it was damaged or written by another Loom. Resume from an earlier checkpoint");
  }
  return out;
}

}  // namespace loom
