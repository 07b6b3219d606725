// sentencepiece_tokenizer.cpp: see sentencepiece_tokenizer.hpp.
#include "sentencepiece_tokenizer.hpp"

#include <sentencepiece_processor.h>

#include "utf8.hpp"

namespace loom::tok {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_bytes, const Json& config, const std::string& source)
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  info_.source = source;
  const auto status = processor_->LoadFromSerializedProto(model_bytes);
  if (!status.ok()) throw TokenizerError(source + ": not a SentencePiece model (" + status.ToString() + ")");
  auto piece = [&](int id) { return id >= 0 ? std::optional<int32_t>(id) : std::nullopt; };
  info_.bos_id = piece(processor_->bos_id());
  info_.eos_id = piece(processor_->eos_id());
  info_.pad_id = piece(processor_->pad_id());
  if (info_.bos_id) info_.bos_token = processor_->IdToPiece(*info_.bos_id);
  if (info_.eos_id) info_.eos_token = processor_->IdToPiece(*info_.eos_id);
  if (info_.pad_id) info_.pad_token = processor_->IdToPiece(*info_.pad_id);
  if (!info_.pad_id) {
    info_.pad_id = info_.eos_id;
    info_.pad_token = info_.eos_token;
  }
  info_.clean_up_tokenization_spaces = false;
  if (config.is_object()) {
    add_bos_ = field_or(config, "add_bos_token", true, "tokenizer_config");
    add_eos_ = field_or(config, "add_eos_token", false, "tokenizer_config");
    const Json& chat = config.value("chat_template", Json());
    if (chat.is_string()) info_.chat_template = chat.get<std::string>();
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int> pieces;
  const auto status = processor_->Encode(sanitize_utf8(text), &pieces);
  if (!status.ok()) throw TokenizerError(info_.source + ": encoding failed (" + status.ToString() + ")");
  std::vector<int32_t> ids;
  ids.reserve(pieces.size() + 2);
  if (add_special_tokens && add_bos_ && info_.bos_id) ids.push_back(*info_.bos_id);
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  if (add_special_tokens && add_eos_ && info_.eos_id) ids.push_back(*info_.eos_id);
  return ids;
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::vector<int> kept;
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= vocab_size()) continue;
    if (skip_special_tokens && is_special(id)) continue;
    kept.push_back(id);
  }
  std::string text;
  const auto status = processor_->Decode(kept, &text);
  if (!status.ok()) throw TokenizerError(info_.source + ": decoding failed (" + status.ToString() + ")");
  return text;
}

std::optional<int32_t> SentencePieceTokenizer::token_id(std::string_view token) const {
  const int id = processor_->PieceToId(std::string(token));
  if (id == processor_->unk_id() && processor_->IdToPiece(id) != token) return std::nullopt;
  return id;
}

size_t SentencePieceTokenizer::vocab_size() const { return static_cast<size_t>(processor_->GetPieceSize()); }

bool SentencePieceTokenizer::is_special(int32_t id) const { return processor_->IsControl(id) || processor_->IsUnknown(id); }

void enable_sentencepiece() {
  set_sentencepiece_loader([](const std::string& model_bytes, const std::string& config_json, const std::string& source) {
    const Json config = config_json.empty() ? Json() : Json::parse(config_json);
    return std::unique_ptr<Tokenizer>(std::make_unique<SentencePieceTokenizer>(model_bytes, config, source));
  });
}

}  // namespace loom::tok
