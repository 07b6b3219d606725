// decoders.hpp: tokenizer.json's `decoder`, which turns token strings back into text. Each type
// maps a list of strings to a list of strings, and a Sequence chains them; the result is joined.
// Supported types: Sequence, ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace,
// WordPiece, BPEDecoder. Invalid UTF-8 produced by byte tokens becomes U+FFFD, as in the
// reference (WHATWG TextDecoder).
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "json_config.hpp"

namespace loom::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual std::vector<std::string> decode_chain(std::vector<std::string> tokens) const = 0;
};

// `added_tokens`: the added tokens' strings, which ByteLevel passes through as they are.
std::unique_ptr<Decoder> make_decoder(const Json& config, const std::string& where,
                                      const std::unordered_set<std::string>& added_tokens);

// transformers' clean_up_tokenization: " ." -> "." and the like, for English artefacts.
std::string clean_up_tokenization(std::string text);

}  // namespace loom::tok
