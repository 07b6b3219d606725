// added_tokens.cpp: see added_tokens.hpp.
#include "added_tokens.hpp"

#include <algorithm>

#include "utf8.hpp"

namespace loom::tok {

AddedTokens::AddedTokens(const Json& list, const std::string& where) {
  if (list.is_null()) return;
  if (!list.is_array()) throw TokenizerError(where + " must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    AddedToken token;
    token.content = required_field<std::string>(list[i], "content", at);
    const auto id = required_field<int64_t>(list[i], "id", at);
    if (id < 0 || id > 16'000'000) throw TokenizerError(at + ".id must be an id from 0 to 16000000");
    if (token.content.empty() || !is_valid_utf8(token.content))
      throw TokenizerError(at + ".content must be non-empty valid UTF-8");
    token.id = static_cast<int32_t>(id);
    token.special = field_or(list[i], "special", false, at);
    token.lstrip = field_or(list[i], "lstrip", false, at);
    token.rstrip = field_or(list[i], "rstrip", false, at);
    insert(token.content, static_cast<int>(tokens_.size()));
    tokens_.push_back(std::move(token));
  }
}

int AddedTokens::child(int node, unsigned char byte) const {
  const auto& children = trie_[static_cast<size_t>(node)].children;
  const auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, 0));
  return it != children.end() && it->first == byte ? it->second : -1;
}

void AddedTokens::insert(const std::string& content, int token) {
  starts_[static_cast<unsigned char>(content[0])] = true;
  int node = 0;
  for (unsigned char byte : content) {
    int next = child(node, byte);
    if (next < 0) {
      next = static_cast<int>(trie_.size());
      trie_.emplace_back();
      auto& children = trie_[static_cast<size_t>(node)].children;
      children.insert(std::lower_bound(children.begin(), children.end(), std::make_pair(byte, 0)), {byte, next});
    }
    node = next;
  }
  trie_[static_cast<size_t>(node)].token = token;  // a repeated content keeps its last entry
}

std::pair<size_t, int> AddedTokens::longest_at(std::string_view text) const {
  std::pair<size_t, int> best{0, -1};
  int node = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (trie_[static_cast<size_t>(node)].token >= 0) best = {i + 1, trie_[static_cast<size_t>(node)].token};
  }
  return best;
}

std::vector<Section> AddedTokens::split(std::string_view text) const {
  std::vector<Section> sections;
  size_t plain_from = 0;
  for (size_t i = 0; i < text.size();) {
    if (!starts_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    const auto [length, token] = longest_at(text.substr(i));
    if (token < 0) {
      ++i;
      continue;
    }
    if (i > plain_from) sections.push_back({text.substr(plain_from, i - plain_from)});
    sections.push_back({text.substr(i, length), token});
    i += length;
    plain_from = i;
  }
  if (plain_from < text.size()) sections.push_back({text.substr(plain_from)});
  // White space beside lstrip/rstrip tokens goes (Unicode White_Space, as in tokenizers).
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].token < 0) continue;
    const AddedToken& t = tokens_[static_cast<size_t>(sections[i].token)];
    if (t.lstrip && i > 0 && sections[i - 1].token < 0) sections[i - 1].text = trim_white_space_end(sections[i - 1].text);
    if (t.rstrip && i + 1 < sections.size() && sections[i + 1].token < 0)
      sections[i + 1].text = trim_white_space_start(sections[i + 1].text);
  }
  return sections;
}

}  // namespace loom::tok
