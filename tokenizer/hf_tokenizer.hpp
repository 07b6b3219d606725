// hf_tokenizer.hpp: Hugging Face's tokenizer.json, the pipeline its `tokenizers` library and
// transformers.js define: added tokens are cut out of the raw text first; each stretch between
// them is normalized, pre-tokenized into pieces and encoded by the model; the post-processor adds
// the template's special tokens. Decoding maps ids to token strings and runs the decoder chain.
#pragma once

#include <memory>
#include <unordered_set>

#include "added_tokens.hpp"
#include "bpe_model.hpp"
#include "decoders.hpp"
#include "normalizers.hpp"
#include "post_processor.hpp"
#include "pre_tokenizers.hpp"
#include "tokenizer.hpp"

namespace loom::tok {

class HfTokenizer : public Tokenizer {
 public:
  // `tokenizer_json`: the parsed file; `config`: tokenizer_config.json's object, or null.
  HfTokenizer(const Json& tokenizer_json, const Json& config, const std::string& source);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const override;
  std::optional<int32_t> token_id(std::string_view token) const override { return vocab_.find(token); }
  size_t vocab_size() const override { return vocab_.tokens.size(); }
  bool is_special(int32_t id) const override { return special_ids_.count(id) > 0; }

 private:
  void encode_section(std::string_view text, size_t section, std::vector<int32_t>& ids) const;
  void read_config(const Json& config);

  Vocabulary vocab_;
  AddedTokens added_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unordered_set<std::string> added_strings_;
  std::unique_ptr<Decoder> decoder_;
  std::unordered_set<int32_t> special_ids_;
  // LlamaTokenizer with legacy = false: "▁" goes in front of the text instead of a normalizer.
  bool llama_non_legacy_ = false;
};

}  // namespace loom::tok
