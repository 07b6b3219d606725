// normalizers.hpp: tokenizer.json's `normalizer`, applied to each stretch of text between added
// tokens before it is split. Supported types: Sequence, NFC, NFD, NFKC, NFKD (utf8proc),
// Replace, Prepend, Strip, Lowercase, StripAccents. Others are refused by name.
#pragma once

#include <memory>
#include <string>

#include "json_config.hpp"

namespace loom::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};

// nullptr for a null config (no normalizer).
std::unique_ptr<Normalizer> make_normalizer(const Json& config, const std::string& where);

}  // namespace loom::tok
