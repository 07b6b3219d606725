// hf_tokenizer.cpp: see hf_tokenizer.hpp.
#include "hf_tokenizer.hpp"

#include "utf8.hpp"

namespace loom::tok {

namespace {

constexpr const char* kMetaspace = "\u2581";

// A token named in tokenizer_config.json: a string, or an AddedToken object with "content".
std::string config_token(const Json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

std::string replace_marker_by_space(std::string_view text) {
  std::string out;
  const std::string_view marker = kMetaspace;
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, marker.size()) == marker) {
      out += ' ';
      i += marker.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

}  // namespace

HfTokenizer::HfTokenizer(const Json& tokenizer_json, const Json& config, const std::string& source) {
  info_.source = source;
  if (!tokenizer_json.is_object()) throw TokenizerError(source + ": not a JSON object");
  const Json& model = tokenizer_json.value("model", Json());
  if (!model.is_object()) throw TokenizerError(source + ": \"model\" must be an object");
  const std::string model_type = model.value("type", model.contains("merges") ? "BPE" : "");
  if (model_type != "BPE")
    throw TokenizerError(source + ": model.type \"" + model_type + "\" is not supported by Loom's tokenizer (only BPE; "
                         "a folder with tokenizer.model loads through SentencePiece instead)");
  try {
    model_ = std::make_unique<BpeModel>(model, "model", vocab_);
    added_ = AddedTokens(tokenizer_json.value("added_tokens", Json::array()), "added_tokens");
    std::unordered_set<std::string> special_strings;
    for (const AddedToken& token : added_.tokens()) {
      vocab_.add(token.content, token.id);
      added_strings_.insert(token.content);
      if (token.special) special_strings.insert(token.content);
    }
    model_->link(vocab_, "model");
    normalizer_ = make_normalizer(tokenizer_json.value("normalizer", Json()), "normalizer");
    pre_tokenizer_ = make_pre_tokenizer(tokenizer_json.value("pre_tokenizer", Json()), "pre_tokenizer");
    post_processor_ = make_post_processor(tokenizer_json.value("post_processor", Json()), "post_processor", vocab_);
    decoder_ = make_decoder(tokenizer_json.value("decoder", Json()), "decoder", added_strings_);
    if (config.is_object()) {
      read_config(config);
      for (const auto& name : config.value("additional_special_tokens", Json::array()))
        if (name.is_string()) special_strings.insert(name.get<std::string>());
    }
    for (const auto& name : special_strings)
      if (const auto id = vocab_.find(name)) special_ids_.insert(*id);
  } catch (const TokenizerError& e) {
    throw TokenizerError(source + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(source + ": a value has the wrong type (" + e.what() + ")");
  }
}

void HfTokenizer::read_config(const Json& config) {
  info_.bos_token = config_token(config, "bos_token");
  info_.eos_token = config_token(config, "eos_token");
  info_.pad_token = config_token(config, "pad_token");
  if (info_.pad_token.empty()) info_.pad_token = info_.eos_token;  // as transformers does
  info_.bos_id = info_.bos_token.empty() ? std::nullopt : vocab_.find(info_.bos_token);
  info_.eos_id = info_.eos_token.empty() ? std::nullopt : vocab_.find(info_.eos_token);
  info_.pad_id = info_.pad_token.empty() ? std::nullopt : vocab_.find(info_.pad_token);
  info_.clean_up_tokenization_spaces = field_or(config, "clean_up_tokenization_spaces", true, "tokenizer_config");
  const Json& chat = config.value("chat_template", Json());
  if (chat.is_string()) {
    info_.chat_template = chat.get<std::string>();
  } else if (chat.is_array()) {  // named templates: the "default" one is the chat template
    for (const auto& entry : chat)
      if (entry.is_object() && entry.value("name", "") == "default" && entry.value("template", Json()).is_string())
        info_.chat_template = entry["template"].get<std::string>();
  }
  // transformers' LlamaTokenizer with legacy = false: no normalizer; "▁" goes in front once.
  std::string tokenizer_class = config.value("tokenizer_class", "");
  if (tokenizer_class == "LlamaTokenizer" || tokenizer_class == "LlamaTokenizerFast") {
    if (config.contains("legacy") && config["legacy"].is_boolean() && !config["legacy"].get<bool>()) {
      llama_non_legacy_ = true;
      normalizer_.reset();
      pre_tokenizer_ = make_pre_tokenizer(
          Json{{"type", "Metaspace"}, {"replacement", kMetaspace}, {"prepend_scheme", "first"}, {"split", false}},
          "pre_tokenizer");
    }
  }
}

void HfTokenizer::encode_section(std::string_view text, size_t section, std::vector<int32_t>& ids) const {
  std::string normalized = normalizer_ ? normalizer_->normalize(std::string(text)) : std::string(text);
  if (normalized.empty()) return;
  std::vector<std::string> pieces{std::move(normalized)};
  if (pre_tokenizer_) pieces = pre_tokenizer_->split(std::move(pieces), section);
  const size_t first = ids.size();
  for (const auto& piece : pieces) model_->encode(piece, vocab_, ids);
  if (model_->fuse_unk() && model_->unk_id()) {  // consecutive unknowns become one
    const int32_t unk = *model_->unk_id();
    size_t kept = first;
    for (size_t i = first; i < ids.size(); ++i)
      if (!(ids[i] == unk && kept > first && ids[kept - 1] == unk)) ids[kept++] = ids[i];
    ids.resize(kept);
  }
}

std::vector<int32_t> HfTokenizer::encode(std::string_view raw, bool add_special_tokens) const {
  std::string text = sanitize_utf8(raw);
  if (llama_non_legacy_ && !text.empty()) text = kMetaspace + replace_marker_by_space(text);
  std::vector<int32_t> ids;
  const std::vector<Section> sections = added_.split(text);
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].token >= 0) ids.push_back(added_.tokens()[static_cast<size_t>(sections[i].token)].id);
    else if (!sections[i].text.empty()) encode_section(sections[i].text, i, ids);
  }
  if (llama_non_legacy_ && ids.size() > 1 && ids[0] == vocab_.find(kMetaspace) && is_special(ids[1])) ids.erase(ids.begin());
  return post_processor_ ? post_processor_->process(std::move(ids), add_special_tokens) : ids;
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  const std::string unk = model_->unk_id() ? vocab_.tokens[static_cast<size_t>(*model_->unk_id())] : "";
  for (const int32_t id : ids) {
    if (skip_special_tokens && is_special(id)) continue;
    const bool known = id >= 0 && static_cast<size_t>(id) < vocab_.tokens.size() && !vocab_.tokens[static_cast<size_t>(id)].empty();
    tokens.push_back(known ? vocab_.tokens[static_cast<size_t>(id)] : unk);
  }
  std::string text;
  if (decoder_) {
    for (const auto& part : decoder_->decode_chain(std::move(tokens))) text += part;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
  }
  return info_.clean_up_tokenization_spaces ? clean_up_tokenization(std::move(text)) : text;
}

}  // namespace loom::tok
