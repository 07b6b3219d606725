#include "checkpoint/sharded_checkpoint.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <vector>

#include "base/failure.hpp"
#include "checkpoint/row_parts.hpp"
#include "checkpoint/tensor_pieces.hpp"

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

// A folder inside dir (one rank's part, one tensor rank's parts), refused unless it is a real
// folder (not a symbolic link that could lead the backend out of the checkpoint).
fs::path inner_folder(const fs::path& dir, const std::string& name) {
  const fs::path folder = dir / name;
  std::error_code ec;
  if (fs::is_symlink(folder, ec) || !fs::is_directory(folder, ec))
    throw runtime_failure(folder.string() + ": missing or a symbolic link; every part of a sharded checkpoint "
                          "must be a folder inside it. Resume from another checkpoint");
  return folder;
}

}  // namespace

std::string rank_folder_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d", rank);
  return name;
}

bool is_sharded_checkpoint(const fs::path& dir) {
  std::error_code ec;  // a symbolic link named rank-00000 counts, and is refused when read
  return fs::is_directory(dir / rank_folder_name(0), ec) || fs::is_symlink(dir / rank_folder_name(0), ec);
}

namespace {

// The parts of one sharded save (rank-<R> folders in dir), as whole tensors.
LoadedCheckpoint read_parts(CheckpointBackendInstance& backend, const fs::path& dir,
                            std::optional<RowWindow> window) {
  LoadedCheckpoint out = backend.load(inner_folder(dir, rank_folder_name(0)).string());
  const std::string origin = dir.string();
  try {
    const nlohmann::json layout = nlohmann::json::parse(out.metadata_json).at("shard");
    const int64_t world = json_integer(layout.at("world_size"), "world_size");
    if (world < 1 || world > 65536) throw std::runtime_error("world_size " + std::to_string(world));
    std::vector<GroupLayout> groups;
    for (const auto& g : layout.at("groups")) {
      const int64_t numel = json_integer(g.at("numel"), "a group's numel");
      if (numel < 0) throw std::runtime_error("group of " + std::to_string(numel) + " elements");
      groups.push_back({dtype_named(g.at("dtype").get<std::string>()), numel, g.at("segments")});
    }
    std::map<std::string, size_t> elementwise;  // optimizer state name -> group
    for (const auto& [name, group] : layout.at("elementwise").items()) {
      const int64_t index = json_integer(group, "the group of state " + name);
      elementwise[name] = static_cast<size_t>(index);
      if (index < 0 || elementwise[name] >= groups.size())
        throw std::runtime_error("state \"" + name + "\" follows group " + group.dump());
    }
    RowPartJoin rows(layout, world, window);
    // Every rank's part, in rank order: its slices must continue where the last rank's ended,
    // and its tensors must be exactly as long. Nothing whole is allocated before they tile.
    std::vector<LoadedCheckpoint> parts(static_cast<size_t>(world));
    std::vector<std::vector<at::Tensor>> param_slices(groups.size());
    std::map<std::string, std::vector<at::Tensor>> state_slices;
    std::vector<int64_t> next_start(groups.size(), 0);
    for (int rank = 0; rank < world; ++rank) {
      if (rank != 0 && groups.empty() && !rows.needs_part(rank)) continue;  // none of the rows asked for
      const fs::path folder = inner_folder(dir, rank_folder_name(rank));
      LoadedCheckpoint& part = rank == 0 ? out : parts[static_cast<size_t>(rank)];
      if (rank != 0) part = backend.load(folder.string());
      const nlohmann::json info = nlohmann::json::parse(part.metadata_json).at("part");
      if (json_integer(info.at("rank"), "a part's rank") != rank) throw std::runtime_error(folder.string() + " holds another rank's part");
      const auto& slices = info.at("slices");
      if (slices.size() != groups.size()) throw std::runtime_error(folder.string() + ": slices for another layout");
      rows.take(part, info, rank, folder.string());
      const auto take = [&](const std::string& key, size_t g, int64_t length) {
        auto it = part.tensors.find(key);
        if (it == part.tensors.end()) throw std::runtime_error(folder.string() + " has no " + key);
        const at::Tensor& t = it->second;
        if (t.dim() != 1 || t.numel() != length || t.scalar_type() != groups[g].dtype)
          throw std::runtime_error(folder.string() + " " + key + " is not a 1-D " +
                                   std::string(c10::toString(groups[g].dtype)) + " of " + std::to_string(length) +
                                   " elements");
        return t;
      };
      for (size_t g = 0; g < groups.size(); ++g) {
        const int64_t start = json_integer(slices[g].at(0), "a slice start"), length = json_integer(slices[g].at(1), "a slice length");
        if (start != next_start[g] || length < 0 || length > groups[g].numel - start)
          throw std::runtime_error(folder.string() + ": group " + std::to_string(g) + " slice [" +
                                   std::to_string(start) + ", +" + std::to_string(length) + ") does not continue at " +
                                   std::to_string(next_start[g]) + " inside " + std::to_string(groups[g].numel));
        param_slices[g].push_back(take(kShardParamsPrefix + std::to_string(g), g, length));
        for (const auto& [name, group] : elementwise)
          if (group == g) state_slices[name].push_back(take(kShardOptimizerPrefix + name, g, length));
        next_start[g] = start + length;
      }
    }
    for (size_t g = 0; g < groups.size(); ++g)
      if (next_start[g] != groups[g].numel)
        throw std::runtime_error("the ranks' slices of group " + std::to_string(g) + " cover " +
                                 std::to_string(next_start[g]) + " of " + std::to_string(groups[g].numel) + " elements");
    for (auto it = out.tensors.begin(); it != out.tensors.end();)  // the slices are put together below
      it = it->first.rfind("shard/", 0) == 0 ? out.tensors.erase(it) : std::next(it);
    rows.finish(out);
    for (size_t g = 0; g < groups.size(); ++g) {
      const at::Tensor whole = at::cat(param_slices[g]);
      param_slices[g].clear();
      for (const auto& s : groups[g].segments) {
        const std::string name = s.at(0).get<std::string>();
        const int64_t offset = json_integer(s.at(1), "the offset of " + name), numel = json_integer(s.at(2), "the size of " + name);
        const std::vector<int64_t> shape = json_integers(s.at(3), "the shape of " + name);
        int64_t shape_numel = 1;
        for (int64_t d : shape) {
          if (d < 0 || (d > 0 && shape_numel > groups[g].numel / d)) throw std::runtime_error("shape of " + name);
          shape_numel *= d;
        }
        if (offset < 0 || numel != shape_numel || offset > groups[g].numel - numel)
          throw std::runtime_error("parameter \"" + name + "\" lies outside its group");
        out.tensors["model/" + name] = whole.narrow(0, offset, numel).view(shape);
      }
    }
    for (auto& [name, pieces] : state_slices) out.tensors["optimizer/" + name] = at::cat(pieces);
  } catch (const Failure&) {
    throw;
  } catch (const std::exception& e) {
    throw runtime_failure(origin + ": unreadable sharded checkpoint: " + e.what() +
                          "; it was damaged or written by another Loom. Resume from an earlier checkpoint");
  }
  return out;
}

// The T sets of parts of a tensor-parallel run, each its tensor rank's pieces, joined.
LoadedCheckpoint read_tensor_parallel(CheckpointBackendInstance& backend, const fs::path& dir) {
  std::vector<LoadedCheckpoint> sets{read_parts(backend, inner_folder(dir, tensor_folder_name(0)), std::nullopt)};
  LoadedCheckpoint out = sets.front();
  try {
    nlohmann::json metadata = nlohmann::json::parse(out.metadata_json);
    const nlohmann::json& tp = metadata.at("tensor_parallel");
    const int64_t size = json_integer(tp.at("size"), "tensor_parallel size");
    if (size < 1 || size > 65536) throw std::runtime_error("tensor_parallel size " + std::to_string(size));
    std::error_code ec;
    if (fs::exists(dir / tensor_folder_name(static_cast<int>(size)), ec) || fs::is_symlink(dir / tensor_folder_name(static_cast<int>(size)), ec))
      throw std::runtime_error("it holds more than the " + std::to_string(size) + " tensor folders its metadata names");
    for (int t = 1; t < size; ++t) {
      sets.push_back(read_parts(backend, inner_folder(dir, tensor_folder_name(t)), std::nullopt));
      const nlohmann::json mine = nlohmann::json::parse(sets.back().metadata_json).at("tensor_parallel");
      if (json_integer(mine.at("rank"), "tensor_parallel rank") != t || json_integer(mine.at("size"), "tensor_parallel size") != size)
        throw std::runtime_error(tensor_folder_name(t) + " holds another tensor rank's parts");
    }
    std::vector<TensorsByName> tensors;
    for (LoadedCheckpoint& set : sets) tensors.push_back(std::move(set.tensors));
    out.tensors = join_tensor_sets(tensors, metadata);
    metadata.erase("shard");  // the joined tensors follow no rank's layout
    metadata.erase("tensor_parallel");
    out.metadata_json = metadata.dump();
  } catch (const Failure&) {
    throw;
  } catch (const std::exception& e) {
    throw runtime_failure(dir.string() + ": unreadable tensor-parallel checkpoint: " + e.what() +
                          "; it was damaged or written by another Loom. Resume from an earlier checkpoint");
  }
  return out;
}

}  // namespace

std::string tensor_folder_name(int tensor_rank) {
  char name[32];
  std::snprintf(name, sizeof name, "tensor-%05d", tensor_rank);
  return name;
}

LoadedCheckpoint read_checkpoint(CheckpointBackendInstance& backend, const fs::path& dir,
                                 std::optional<RowWindow> window) {
  std::error_code ec;
  if (fs::is_directory(dir / tensor_folder_name(0), ec) || fs::is_symlink(dir / tensor_folder_name(0), ec))
    return read_tensor_parallel(backend, dir);
  if (!is_sharded_checkpoint(dir)) return backend.load(dir.string());
  return read_parts(backend, dir, window);
}

}  // namespace loom
