// tokenizer.hpp: Loom's text tokenizers, the one interface the rest of Loom uses.
//
//   auto tok = loom::tok::load_tokenizer("models/qwen3");  // a folder, tokenizer.json or tokenizer.model
//   std::vector<int32_t> ids = tok->encode("Hello");         // with the template's special tokens
//   std::string text = tok->decode(ids);
//
// A folder with tokenizer.json is read as Hugging Face's format (hf_tokenizer.hpp), with
// tokenizer_config.json beside it for the chat template and the named special tokens; a folder
// with only tokenizer.model goes through SentencePiece. Encoding is thread-safe: one tokenizer
// serves every thread. Input text may hold invalid UTF-8: it is replaced as the reference does.
// Files are untrusted: every reader checks sizes and types and throws TokenizerError with the
// file and the JSON path of what is wrong; nothing is read outside the folder given.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer_error.hpp"

namespace loom::tok {

// What tokenizer_config.json says around the vocabulary.
struct TokenizerInfo {
  std::string source;         // the file the vocabulary came from
  std::string chat_template;  // Jinja, "" when the folder ships none
  std::string bos_token, eos_token, pad_token;
  std::optional<int32_t> bos_id, eos_id, pad_id;
  bool clean_up_tokenization_spaces = true;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const = 0;

  virtual std::optional<int32_t> token_id(std::string_view token) const = 0;
  // One more than the largest id (the model's embedding needs at least this many rows).
  virtual size_t vocab_size() const = 0;
  virtual bool is_special(int32_t id) const = 0;

  const TokenizerInfo& info() const { return info_; }

 protected:
  TokenizerInfo info_;
};

// Loads `path`: a folder holding tokenizer.json (or tokenizer.model), or one of those files.
// Throws TokenizerError (bad content) or loom::formats::FormatError (missing, unreadable).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// tokenizer.model support lives in its own library (loom_tokenizer_sentencepiece), because
// Debian's libsentencepiece carries its own protobuf and crashes a process that also loads
// LibTorch's. Programs without LibTorch (loom-tokenize) call this once to enable it; elsewhere
// a tokenizer.model-only folder is refused with that explanation.
using SentencePieceLoader = std::unique_ptr<Tokenizer> (*)(const std::string& model_bytes, const std::string& config_json,
                                                           const std::string& source);
void set_sentencepiece_loader(SentencePieceLoader loader);

}  // namespace loom::tok
