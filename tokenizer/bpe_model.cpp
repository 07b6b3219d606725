// bpe_model.cpp: see bpe_model.hpp.
#include "bpe_model.hpp"

#include <cstdio>
#include <queue>
#include <tuple>

#include "utf8.hpp"

namespace loom::tok {

void Vocabulary::add(const std::string& token, int32_t id) {
  ids[token] = id;
  if (static_cast<size_t>(id) >= tokens.size()) tokens.resize(static_cast<size_t>(id) + 1);
  tokens[static_cast<size_t>(id)] = token;
}

namespace {

// Ids above this are refused: a vocabulary is at most a few million tokens, and the table of
// tokens by id is sized by the largest id.
constexpr int64_t kMaxTokenId = 16'000'000;

// Pieces with more characters than this merge through the heap.
constexpr size_t kShortPiece = 48;

std::pair<std::string, std::string> parse_merge(const Json& entry, const std::string& where) {
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string())
    return {entry[0].get<std::string>(), entry[1].get<std::string>()};
  if (entry.is_string()) {  // older files: "left right", split at the first space
    const std::string text = entry.get<std::string>();
    const size_t space = text.find(' ');
    if (space != std::string::npos) return {text.substr(0, space), text.substr(space + 1)};
  }
  throw TokenizerError(where + " must be \"left right\" or [\"left\", \"right\"]");
}

}  // namespace

BpeModel::BpeModel(const Json& config, const std::string& where, Vocabulary& vocab) {
  const auto vocab_it = config.find("vocab");
  if (vocab_it == config.end() || !vocab_it->is_object()) throw TokenizerError(where + ".vocab must be an object");
  for (const auto& [token, id] : vocab_it->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxTokenId)
      throw TokenizerError(where + ".vocab[\"" + token + "\"] must be an id from 0 to " + std::to_string(kMaxTokenId));
    if (!is_valid_utf8(token)) throw TokenizerError(where + ".vocab has a token that is not valid UTF-8");
    vocab.add(token, static_cast<int32_t>(id.get<int64_t>()));
  }
  const Json& merges = required_array(config, "merges", where);
  merge_list_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i)
    merge_list_.push_back(parse_merge(merges[i], where + ".merges[" + std::to_string(i) + "]"));
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix", "continuing_subword_suffix"}) {
    if (!field_or<std::string>(config, key, "", where).empty())
      throw TokenizerError(where + "." + key + " is not supported by Loom's tokenizer (only \"\" or null)");
  }
  if (field_or(config, "dropout", 0.0, where) != 0.0)
    throw TokenizerError(where + ".dropout is not supported by Loom's tokenizer (only null or 0)");
  unk_token_ = field_or<std::string>(config, "unk_token", "", where);
  byte_fallback_ = field_or(config, "byte_fallback", false, where);
  fuse_unk_ = field_or(config, "fuse_unk", false, where);
  ignore_merges_ = field_or(config, "ignore_merges", false, where);
}

void BpeModel::link(const Vocabulary& vocab, const std::string& where) {
  merges_.reserve(merge_list_.size());
  for (size_t rank = 0; rank < merge_list_.size(); ++rank) {
    const auto& [left, right] = merge_list_[rank];
    const auto a = vocab.find(left), b = vocab.find(right), result = vocab.find(left + right);
    if (!a || !b || !result)
      throw TokenizerError(where + ".merges[" + std::to_string(rank) + "] merges tokens into one that the vocabulary lacks");
    merges_[pair_key(*a, *b)] = Merge{static_cast<int32_t>(rank), *result};  // a repeated merge keeps its last rank
  }
  merge_list_.clear();
  merge_list_.shrink_to_fit();
  for (const auto& [token, id] : vocab.ids) {
    size_t pos = 0;
    if (!token.empty() && utf8_length(static_cast<unsigned char>(token[0])) == token.size())
      char_ids_[next_code_point(token, pos)] = id;
  }
  if (!unk_token_.empty()) {
    unk_id_ = vocab.find(unk_token_);
    if (!unk_id_) throw TokenizerError(where + ".unk_token \"" + unk_token_ + "\" is not in the vocabulary");
  }
  if (byte_fallback_) {
    byte_ids_.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (const auto id = vocab.find(name)) byte_ids_[static_cast<size_t>(b)] = *id;
    }
  }
}

const BpeModel::Merge* BpeModel::find_merge(int32_t a, int32_t b) const {
  if (a < 0 || b < 0) return nullptr;
  const auto it = merges_.find(pair_key(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::merge_short(std::vector<Symbol>& symbols) const {
  while (symbols.size() > 1) {
    size_t best = 0;
    const Merge* best_merge = nullptr;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const Merge* m = find_merge(symbols[i].id, symbols[i + 1].id);
      if (m && (!best_merge || m->rank < best_merge->rank)) {
        best = i;
        best_merge = m;
      }
    }
    if (!best_merge) return;
    symbols[best].id = best_merge->result;
    symbols[best].end = symbols[best + 1].end;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

void BpeModel::merge_long(std::vector<Symbol>& symbols) const {
  const int n = static_cast<int>(symbols.size());
  std::vector<int> next(static_cast<size_t>(n)), prev(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    next[static_cast<size_t>(i)] = i + 1 < n ? i + 1 : -1;
    prev[static_cast<size_t>(i)] = i - 1;
  }
  // (rank, left symbol, left id, right id): lowest rank first, then leftmost. An entry whose
  // symbols have changed since it was pushed is stale and skipped.
  using Entry = std::tuple<int32_t, int, int32_t, int32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  auto push = [&](int left) {
    const int right = next[static_cast<size_t>(left)];
    if (right < 0) return;
    const int32_t a = symbols[static_cast<size_t>(left)].id, b = symbols[static_cast<size_t>(right)].id;
    if (const Merge* m = find_merge(a, b)) queue.emplace(m->rank, left, a, b);
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  std::vector<bool> alive(static_cast<size_t>(n), true);
  while (!queue.empty()) {
    const auto [rank, left, a, b] = queue.top();
    queue.pop();
    const int right = next[static_cast<size_t>(left)];
    if (!alive[static_cast<size_t>(left)] || right < 0 || symbols[static_cast<size_t>(left)].id != a ||
        symbols[static_cast<size_t>(right)].id != b)
      continue;
    Symbol& merged = symbols[static_cast<size_t>(left)];
    merged.id = find_merge(a, b)->result;
    merged.end = symbols[static_cast<size_t>(right)].end;
    alive[static_cast<size_t>(right)] = false;
    next[static_cast<size_t>(left)] = next[static_cast<size_t>(right)];
    if (next[static_cast<size_t>(left)] >= 0) prev[static_cast<size_t>(next[static_cast<size_t>(left)])] = left;
    if (prev[static_cast<size_t>(left)] >= 0) push(prev[static_cast<size_t>(left)]);
    push(left);
  }
  std::vector<Symbol> kept;
  for (int i = 0; i >= 0 && i < n; i = next[static_cast<size_t>(i)]) kept.push_back(symbols[static_cast<size_t>(i)]);
  symbols = std::move(kept);
}

void BpeModel::emit(std::string_view piece, const std::vector<Symbol>& symbols, std::vector<int32_t>& ids) const {
  for (const Symbol& s : symbols) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (uint32_t i = s.begin; i < s.end; ++i) all = all && byte_ids_[static_cast<unsigned char>(piece[i])] >= 0;
      if (all) {
        for (uint32_t i = s.begin; i < s.end; ++i) ids.push_back(byte_ids_[static_cast<unsigned char>(piece[i])]);
        continue;
      }
    }
    if (!unk_id_)
      throw TokenizerError("the text has a character that the vocabulary lacks, and the model names no unk_token");
    ids.push_back(*unk_id_);
  }
}

void BpeModel::encode(std::string_view piece, const Vocabulary& vocab, std::vector<int32_t>& ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (const auto id = vocab.find(piece)) {
      ids.push_back(*id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (size_t pos = 0; pos < piece.size();) {
    const auto begin = static_cast<uint32_t>(pos);
    const char32_t cp = next_code_point(piece, pos);
    const auto it = char_ids_.find(cp);
    symbols.push_back({it == char_ids_.end() ? -1 : it->second, begin, static_cast<uint32_t>(pos)});
  }
  if (symbols.size() > kShortPiece) merge_long(symbols);
  else merge_short(symbols);
  emit(piece, symbols, ids);
}

}  // namespace loom::tok
