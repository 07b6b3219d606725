// sft_encode.cpp: see sft_encode.hpp.
#include "sft_encode.hpp"

#include <stdexcept>

namespace loom::sft {

namespace {

struct Piece {
  std::string text;
  bool trained;
  bool special_tokens = false;  // the post-processor's BOS (plain formats only)
};

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

// Prompt pieces and answer pieces of a conversation, by rendering its prefixes.
std::vector<Piece> conversation_pieces(const std::vector<Message>& messages, const RenderFn& render,
                                       const std::string& train_on, const std::string& where) {
  const std::string whole = render(messages, false);
  if (train_on == "all") return {{whole, true}};
  size_t last_assistant = messages.size();
  for (size_t k = 0; k < messages.size(); ++k)
    if (messages[k].role == "assistant") last_assistant = k;
  if (last_assistant == messages.size()) return {{whole, false}};  // nothing to learn: dropped later
  std::vector<Piece> pieces;
  std::string so_far;
  for (size_t k = 0; k < messages.size(); ++k) {
    if (messages[k].role != "assistant" || (train_on == "last_assistant" && k != last_assistant)) continue;
    const std::vector<Message> before(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(k));
    const std::string prompt = render(before, true);
    const std::string through = render(std::vector<Message>(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(k) + 1), false);
    if (!starts_with(prompt, so_far) || !starts_with(through, prompt) || !starts_with(whole, through))
      throw BadLine(where + ": the chat template renders turn " + std::to_string(k) +
                    " differently once later turns follow, so its answer cannot be marked; use train_on = "
                    "\"last_assistant\" (or \"all\")");
    pieces.push_back({prompt.substr(so_far.size()), false});
    pieces.push_back({through.substr(prompt.size()), true});
    so_far = through;
  }
  pieces.push_back({whole.substr(so_far.size()), false});
  return pieces;
}

std::vector<Piece> plain_pieces(const Record& r, const tok::Tokenizer& tokenizer) {
  const auto eos = tokenizer.info().eos_token;
  if (r.kind == Record::Kind::text) return {{r.text, true, true}, {eos, true}};
  return {{r.prompt, false, true}, {r.completion, true}, {eos, true}};
}

}  // namespace

void check_encode_options(const EncodeOptions& o) {
  if (o.train_on != "assistant" && o.train_on != "last_assistant" && o.train_on != "all")
    throw std::invalid_argument("train_on must be assistant, last_assistant or all; got \"" + o.train_on + "\"");
  if (o.truncation != "right" && o.truncation != "drop")
    throw std::invalid_argument("truncation must be right or drop; got \"" + o.truncation + "\"");
  if (o.max_length < 2) throw std::invalid_argument("max_length must be at least 2 tokens");
}

Sample encode_record(const Record& record, const tok::Tokenizer& tokenizer, const RenderFn& render,
                     const EncodeOptions& options) {
  std::vector<Piece> pieces;
  if (record.kind == Record::Kind::messages) {
    if (!render) throw BadLine(record.where + ": messages need a chat template, and chat_template is \"none\"");
    pieces = conversation_pieces(record.messages, render, options.train_on, record.where);
  } else if (record.kind == Record::Kind::prompt_completion && render) {
    pieces = conversation_pieces({{"user", record.prompt, {{"role", "user"}, {"content", record.prompt}}},
                                  {"assistant", record.completion, {{"role", "assistant"}, {"content", record.completion}}}},
                                 render, options.train_on, record.where);
  } else {
    pieces = plain_pieces(record, tokenizer);
    if (options.train_on == "all")
      for (auto& p : pieces) p.trained = true;
  }
  Sample s;
  for (const Piece& p : pieces) {
    if (p.text.empty()) continue;
    const std::vector<int32_t> ids = tokenizer.encode(p.text, p.special_tokens);
    s.ids.insert(s.ids.end(), ids.begin(), ids.end());
    s.trained.insert(s.trained.end(), ids.size(), p.trained ? 1 : 0);
  }
  if (static_cast<int64_t>(s.ids.size()) > options.max_length) {
    if (options.truncation == "drop") {
      s.outcome = Sample::Outcome::too_long;
      return s;
    }
    s.ids.resize(static_cast<size_t>(options.max_length));
    s.trained.resize(static_cast<size_t>(options.max_length));
    s.outcome = Sample::Outcome::truncated;
  }
  // Token 0 is never a label (nothing precedes it), so a sample needs a trained token after it.
  bool any = false;
  for (size_t i = 1; i < s.trained.size(); ++i) any = any || s.trained[i];
  if (!any) s.outcome = Sample::Outcome::no_trainable;
  return s;
}

}  // namespace loom::sft
