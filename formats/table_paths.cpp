// table_paths.cpp: the `path` option of the Parquet/Arrow readers to files (table_paths.hpp).
#include "formats/table_paths.hpp"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/files.hpp"
#include "formats/format_error.hpp"

namespace loom::formats {

namespace {

namespace fs = std::filesystem;

bool is_table_name(const fs::path& p) { return p.extension() == ".parquet" || p.extension() == ".arrow"; }

void walk(const fs::path& dir, std::vector<std::string>& out) {
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
  if (ec) throw FormatError(FormatError::Kind::io, dir.string() + ": cannot list the folder: " + ec.message());
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
  for (const auto& e : entries) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (e.is_symlink(ec) && e.is_directory(ec)) continue;
    if (e.is_directory(ec)) {
      walk(e.path(), out);
    } else if (is_table_name(e.path()) && is_regular_file(e.path().string())) {
      out.push_back(e.path().string());
    }
  }
}

// save_to_disk's folder: state.json's "_data_files": [{"filename": "data-00000-of-00001.arrow"}, ...].
std::vector<std::string> datasets_folder(const std::string& dir) {
  const std::string state = join(dir, "state.json");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(state, 1 << 24));
  } catch (const nlohmann::json::exception& e) {
    invalid(state + ": not JSON (" + std::string(e.what()) + "); the datasets folder is damaged");
  }
  const auto files = j.is_object() ? j.find("_data_files") : j.end();
  if (!j.is_object() || files == j.end() || !files->is_array() || files->empty())
    invalid(state + ": no \"_data_files\" list; is this a folder datasets' save_to_disk wrote?");
  std::vector<std::string> out;
  for (const auto& entry : *files) {
    const auto name = entry.is_object() ? entry.find("filename") : entry.end();
    if (name == entry.end() || !name->is_string() || !plain_name(name->get<std::string>()))
      invalid(state + ": a \"_data_files\" entry is not {\"filename\": NAME} with a name inside the folder");
    const std::string file = join(dir, name->get<std::string>());
    if (!is_regular_file(file)) invalid(state + " lists " + file + ", which is not a regular file there; the folder is incomplete");
    out.push_back(file);
  }
  return out;
}

std::string dataset_dict_splits(const std::string& dir) {
  std::string splits;
  try {
    const auto j = nlohmann::json::parse(read_text_file(join(dir, "dataset_dict.json"), 1 << 20));
    if (j.contains("splits") && j["splits"].is_array())
      for (const auto& s : j["splits"])
        if (s.is_string()) splits += (splits.empty() ? "" : ", ") + s.get<std::string>();
  } catch (const nlohmann::json::exception&) {
  }
  return splits.empty() ? "?" : splits;
}

void resolve_one(const std::string& entry, std::vector<std::string>& out) {
  if (entry.find_first_of("*?[") != std::string::npos) {
    glob_t g{};
    const int rc = ::glob(entry.c_str(), 0, nullptr, &g);
    std::vector<std::string> found;
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i)
      if (is_regular_file(g.gl_pathv[i])) found.push_back(g.gl_pathv[i]);
    globfree(&g);
    if (found.empty()) throw FormatError(FormatError::Kind::not_found, entry + ": the pattern matches no regular file; check it");
    out.insert(out.end(), found.begin(), found.end());  // glob sorts by name
    return;
  }
  std::error_code ec;
  if (fs::is_directory(entry, ec)) {
    if (path_exists(join(entry, "dataset_dict.json")))
      invalid(entry + ": a datasets DatasetDict folder (splits: " + dataset_dict_splits(entry) +
              "); point the path at one split's folder, e.g. " + join(entry, "train"));
    if (path_exists(join(entry, "state.json"))) {
      const auto files = datasets_folder(entry);
      out.insert(out.end(), files.begin(), files.end());
      return;
    }
    const size_t before = out.size();
    walk(entry, out);
    if (out.size() == before) invalid(entry + ": the folder holds no .parquet or .arrow file; point the path at the data");
    return;
  }
  if (is_regular_file(entry)) {
    out.push_back(entry);
  } else if (path_exists(entry)) {
    invalid(entry + ": not a regular file (a FIFO or a device is never read); point the path at Parquet or Arrow files");
  } else {
    throw FormatError(FormatError::Kind::not_found, entry + ": no such file or folder; check the path");
  }
}

}  // namespace

std::vector<std::string> resolve_table_paths(const std::string& option) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= option.size()) {
    size_t end = option.find(',', start);
    if (end == std::string::npos) end = option.size();
    const std::string entry = option.substr(start, end - start);
    start = end + 1;
    if (!entry.empty()) resolve_one(entry, out);
  }
  if (out.empty()) invalid("the path names no file; give Parquet or Arrow files, a folder or a pattern");
  return out;
}

}  // namespace loom::formats
