// table_paths.hpp: which Parquet and Arrow files a `path` option names, in the order a corpus
// reads them. One entry, or several separated by ',', each of:
//   - a file (taken whatever its name);
//   - a glob pattern ("data/*/000_*.parquet"): the regular files it matches, in byte order;
//   - a folder saved by Hugging Face datasets' save_to_disk (it holds state.json): the files its
//     "_data_files" list, in that order; a DatasetDict's folder (dataset_dict.json) is refused
//     with its splits named;
//   - any other folder, walked depth first in byte order of names: every *.parquet and *.arrow
//     file (FineWeb's data/CC-MAIN-*/ layout), hidden entries and symbolic links to folders
//     skipped.
// Nothing is followed out of a datasets folder, and what is not a regular file is refused
// without opening it. Arrow-free. Throws FormatError naming the entry and the fix.
#pragma once

#include <string>
#include <vector>

namespace loom::formats {

std::vector<std::string> resolve_table_paths(const std::string& option);

}  // namespace loom::formats
