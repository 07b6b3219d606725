// post_processor.hpp: tokenizer.json's `post_processor`, which adds the special tokens a model
// expects around an encoded text (a BOS token, BERT's [CLS] and [SEP]). Supported types:
// TemplateProcessing, ByteLevel (adds nothing), BertProcessing, RobertaProcessing, Sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bpe_model.hpp"
#include "json_config.hpp"

namespace loom::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // `ids` of one text; adds the special tokens when `add_special_tokens`.
  virtual std::vector<int32_t> process(std::vector<int32_t> ids, bool add_special_tokens) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const Json& config, const std::string& where, const Vocabulary& vocab);

}  // namespace loom::tok
