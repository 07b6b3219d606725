// pre_tokenizers.hpp: tokenizer.json's `pre_tokenizer`, which cuts normalized text into the
// pieces the model encodes one by one. Supported types: Sequence, Split (all five behaviours,
// invert), ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit. Others are refused by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "json_config.hpp"

namespace loom::tok {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Cuts each piece of `pieces` further. `section` counts the stretches of text between added
  // tokens (Metaspace's prepend_scheme "first" looks at it).
  virtual std::vector<std::string> split(std::vector<std::string> pieces, size_t section) const = 0;
};

// nullptr for a null config (the whole stretch is one piece).
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& config, const std::string& where);

}  // namespace loom::tok
