// added_tokens.hpp: tokenizer.json's `added_tokens` (special tokens such as <|im_start|> and any
// tokens added after training). They are found in the raw text before anything else runs: at
// each position the longest added token that starts there wins, the leftmost position first, and
// the text between them goes through normalizer, pre-tokenizer and model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "json_config.hpp"

namespace loom::tok {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false, lstrip = false, rstrip = false;
};

// One stretch of the input: an added token (`token` >= 0, index into the list) or plain text.
struct Section {
  std::string_view text;
  int token = -1;
};

class AddedTokens {
 public:
  AddedTokens() = default;
  AddedTokens(const Json& list, const std::string& where);

  const std::vector<AddedToken>& tokens() const { return tokens_; }

  // Cuts `text` into sections; lstrip/rstrip tokens eat the white space beside them.
  std::vector<Section> split(std::string_view text) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int>> children;  // sorted by byte
    int token = -1;                                        // index of the token ending here
  };
  int child(int node, unsigned char byte) const;
  void insert(const std::string& content, int token);
  // Length and index of the longest added token at the start of `text`, or {0, -1}.
  std::pair<size_t, int> longest_at(std::string_view text) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_{1};
  bool starts_[256] = {};
};

}  // namespace loom::tok
