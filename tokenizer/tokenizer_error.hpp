// tokenizer_error.hpp: what the tokenizer readers throw. The message names the file and the
// place in it (a JSON path such as `pre_tokenizer.pretokenizers[0].pattern`) and what is wrong.
#pragma once

#include <stdexcept>
#include <string>

namespace loom::tok {

struct TokenizerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace loom::tok
