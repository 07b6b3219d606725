// sentencepiece_tokenizer.hpp (library loom_tokenizer_sentencepiece, see tokenizer.hpp for why it
// is separate): folders that ship only SentencePiece's tokenizer.model (older
// Llama, T5, many multilingual models) go through Debian's libsentencepiece, the library that
// defines the format. tokenizer_config.json beside it says whether a BOS (default yes) and an
// EOS (default no) token frame each text, as transformers' LlamaTokenizer does.
#pragma once

#include <memory>

#include "json_config.hpp"
#include "tokenizer.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace loom::tok {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // `model_bytes`: the serialized model; `config`: tokenizer_config.json's object, or null.
  SentencePieceTokenizer(const std::string& model_bytes, const Json& config, const std::string& source);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const override;
  std::optional<int32_t> token_id(std::string_view token) const override;
  size_t vocab_size() const override;
  bool is_special(int32_t id) const override;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  bool add_bos_ = true, add_eos_ = false;
};

// Registers this reader with load_tokenizer (tokenizer.hpp).
void enable_sentencepiece();

}  // namespace loom::tok
