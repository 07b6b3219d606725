#include "hf_folder.hpp"

#include <algorithm>
#include <set>

#include "format_error.hpp"

namespace loom::formats {

nlohmann::json read_json_object(const std::string& path) {
  const std::string text = read_text_file(path, kMaxJsonBytes);
  try {
    nlohmann::json json = nlohmann::json::parse(text);
    if (!json.is_object()) invalid("'" + path + "' is JSON but not an object ({...})");
    return json;
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the offset of the error; turn it into a line for the message.
    const size_t at = std::min<size_t>(e.byte, text.size());
    const size_t line = 1 + size_t(std::count(text.begin(), text.begin() + long(at), '\n'));
    invalid("'" + path + "' line " + std::to_string(line) + " is not valid JSON: " + e.what());
  } catch (const nlohmann::json::exception& e) {
    // The parser's other refusal: a number too large for a double (out_of_range 406).
    invalid("'" + path + "' is not JSON Loom can read: " + e.what());
  }
}

bool has_hf_weights(const std::string& dir) {
  return path_exists(join(dir, kHfWeights)) || path_exists(join(dir, kHfIndex));
}

HfWeights::HfWeights(const std::string& dir) : dir_(dir) {
  if (path_exists(join(dir, kHfWeights))) {
    add_file(kHfWeights, nullptr);
  } else if (path_exists(join(dir, kHfIndex))) {
    const std::string index_path = join(dir, kHfIndex);
    const nlohmann::json index = read_json_object(index_path);
    const auto map = index.find("weight_map");
    if (map == index.end() || !map->is_object() || map->empty())
      invalid("'" + index_path + "' has no \"weight_map\" object naming each tensor's file");
    // Each shard once, in the order the index first names it; its tensor names to check.
    std::vector<std::string> shards;
    std::map<std::string, nlohmann::json> expected;
    for (const auto& [tensor, file] : map->items()) {
      if (!file.is_string()) invalid("'" + index_path + "': weight_map[\"" + tensor + "\"] is not a file name");
      const std::string name = file.get<std::string>();
      if (!plain_name(name))
        invalid("'" + index_path + "' names the file \"" + name + "\" for tensor '" + tensor +
                "', which is not a plain file name in the folder (no '/', '.' or '..'); the index is corrupt or "
                "hostile");
      if (expected.find(name) == expected.end()) shards.push_back(name);
      expected[name].push_back(tensor);
    }
    for (const std::string& shard : shards) {
      if (!path_exists(join(dir, shard)))
        throw FormatError(FormatError::Kind::not_found,
                          "'" + index_path + "' names the shard '" + shard + "', which is not a file in '" + dir +
                              "'; download the missing shard or fix the index");
      add_file(shard, &expected[shard]);
    }
  } else {
    throw FormatError(FormatError::Kind::not_found, "'" + dir + "' holds neither " + kHfWeights + " nor " + kHfIndex +
                                                        "; pass a Hugging Face model folder with safetensors weights");
  }
  for (const auto& [name, t] : by_name_) names_.push_back(name);
}

void HfWeights::add_file(const std::string& name, const nlohmann::json* expected_names) {
  files_.push_back(std::make_unique<SafetensorsFile>(join(dir_, name)));
  const SafetensorsFile& file = *files_.back();
  for (const TensorEntry& e : file.tensors()) {
    const auto [it, fresh] = by_name_.emplace(e.name, Tensor{&file, &e});
    if (!fresh)
      invalid("tensor '" + e.name + "' is in both '" + it->second.file->path() + "' and '" + file.path() +
              "'; the shards overlap");
    total_bytes_ += e.end - e.begin;
  }
  if (expected_names == nullptr) return;
  for (const auto& tensor : *expected_names)
    if (file.find(tensor.get<std::string>()) == nullptr)
      invalid("the index says tensor '" + tensor.get<std::string>() + "' is in '" + file.path() +
              "', but that shard does not hold it; the folder is incomplete or the index is stale");
}

const HfWeights::Tensor* HfWeights::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

}  // namespace loom::formats
