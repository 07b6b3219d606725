// bpe_model.hpp: tokenizer.json's BPE model. A piece is split into characters, the adjacent pair
// with the lowest merge rank is merged (the leftmost on ties) until no listed merge applies, and
// the resulting tokens are looked up. Characters outside the vocabulary become byte tokens
// <0xNN> under byte_fallback (SentencePiece-style BPE: Llama 2, Gemma) or the unk token.
// Pieces already in the vocabulary skip merging under ignore_merges (Llama 3).
//
// Works on token ids, not strings: a merge is a pair of ids with a rank and the id it makes.
// Long pieces (SentencePiece BPE sees whole paragraphs as one piece) merge through a heap, so a
// piece of n characters costs O(n log n), not O(n^2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "json_config.hpp"

namespace loom::tok {

// Token strings and ids: the model's vocabulary plus the added tokens (which win on a clash).
struct Vocabulary {
  std::unordered_map<std::string, int32_t> ids;
  std::vector<std::string> tokens;  // by id; "" where no token has that id

  std::optional<int32_t> find(std::string_view token) const {
    const auto it = ids.find(std::string(token));
    return it == ids.end() ? std::nullopt : std::optional<int32_t>(it->second);
  }
  void add(const std::string& token, int32_t id);
};

class BpeModel {
 public:
  // `config` is tokenizer.json's "model"; `vocab` receives its vocabulary.
  BpeModel(const Json& config, const std::string& where, Vocabulary& vocab);

  // Appends the ids of one pre-tokenized piece.
  void encode(std::string_view piece, const Vocabulary& vocab, std::vector<int32_t>& ids) const;

  std::optional<int32_t> unk_id() const { return unk_id_; }
  bool fuse_unk() const { return fuse_unk_; }

  // Resolves merges and byte tokens against the final vocabulary (after added tokens).
  void link(const Vocabulary& vocab, const std::string& where);

 private:
  struct Symbol {
    int32_t id;  // -1: a character the vocabulary lacks
    uint32_t begin, end;
  };
  struct Merge {
    int32_t rank, result;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* find_merge(int32_t a, int32_t b) const;
  void merge_short(std::vector<Symbol>& symbols) const;
  void merge_long(std::vector<Symbol>& symbols) const;
  void emit(std::string_view piece, const std::vector<Symbol>& symbols, std::vector<int32_t>& ids) const;

  std::vector<std::pair<std::string, std::string>> merge_list_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::unordered_map<char32_t, int32_t> char_ids_;
  std::vector<int32_t> byte_ids_;  // <0xNN> tokens, when byte_fallback
  std::optional<int32_t> unk_id_;
  std::string unk_token_;
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
};

}  // namespace loom::tok
