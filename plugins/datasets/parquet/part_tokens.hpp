// part_tokens.hpp: one part of a table (a Parquet row group, an Arrow record batch) as the token
// ids a corpus stream takes from it: each row of a text column tokenized (rows split over
// `threads` threads, joined back in row order) and followed by the separator, or each row of a
// token-id column taken as it is. Shared by the `parquet` dataset (document_stream.hpp) and
// tools/bench's reading benchmark. Torch-free, SDK-free; errors are loom::data::DataError.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "formats/format_error.hpp"
#include "plugins/datasets/common/data_error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace loom::parquet_data {

struct PartTokens {
  std::string column = "text";
  bool text = true;                           // the column holds text (else token ids)
  const tok::Tokenizer* tokenizer = nullptr;  // for a text column
  bool add_special_tokens = false;
  std::optional<int32_t> separator;           // after each text row
  unsigned threads = 1;
  uint64_t vocab_size = 0;                    // > 0: every id must be below it

  // The tokens of part `part` of `file`; hands the file's pages back afterwards.
  std::vector<int32_t> read(const std::string& file, size_t part) const;
};

// Runs fn, turning a table reader's or tokenizer's refusal into a DataError (bad_input, or io
// where the system failed).
template <class Fn>
auto as_data_error(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const formats::FormatError& e) {
    if (e.kind() == formats::FormatError::Kind::io) throw data::io_error(e.what());
    throw data::bad_input(e.what());
  } catch (const tok::TokenizerError& e) {
    throw data::bad_input(std::string("tokenizer: ") + e.what());
  }
}

}  // namespace loom::parquet_data
