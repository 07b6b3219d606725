// sft_tables.hpp: instruction data in Parquet and Arrow files (UltraChat's and Tulu 3's `messages`,
// a list of {role, content} structs; `prompt`/`completion` columns; a datasets save_to_disk
// folder): each row becomes the JSON object of its columns (formats/table_file.hpp read_json), so
// it goes through exactly the JSONL path (sft_records.hpp) with its fields, formats and
// on_bad_line, named "FILE row N". Without Arrow in the build, a table file is refused by name.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace loom::sft {

// True for a name ending in .parquet or .arrow.
bool is_table_file(const std::string& path);

// The data files a save_to_disk folder's state.json lists, in order. Throws std::invalid_argument.
std::vector<std::string> saved_dataset_files(const std::string& folder);

// Calls row(json, where) for every row of a table file, in order. Throws std::invalid_argument
// for a file that is not a table or a column JSON cannot hold.
void for_each_table_row(const std::string& file, const std::function<void(std::string json, std::string where)>& row);

}  // namespace loom::sft
