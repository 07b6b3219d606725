// sft_encode.hpp: one instruction sample to token ids and a trained/not-trained flag per token.
//
// Which tokens carry loss comes from the chat template's own turn boundaries, not from guessing
// at role markers: for the k-th assistant message, the template renders the conversation up to
// it with add_generation_prompt (the prompt) and up to and including it (the prompt plus the
// answer); the difference is the answer, ending-of-turn tokens included. Each piece is
// tokenized on its own (add_special_tokens off: the template writes BOS itself), as torchtune
// and TRL do. A template that renders earlier turns differently once later turns follow (Qwen3
// drops old reasoning) cannot mark every turn; such samples ask for train_on = "last_assistant".
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sft_records.hpp"
#include "tokenizer/tokenizer.hpp"

namespace loom::sft {

// Renders messages through the chat template (add_generation_prompt as given); throws
// BadLine when the template refuses them (raise_exception).
using RenderFn = std::function<std::string(const std::vector<Message>&, bool add_generation_prompt)>;

struct EncodeOptions {
  std::string train_on = "assistant";  // assistant | last_assistant | all
  int64_t max_length = 0;              // tokens per sample, at least 2
  std::string truncation = "right";    // right: keep the first max_length tokens; drop: skip the sample
};

struct Sample {
  enum class Outcome { kept, truncated, too_long, no_trainable } outcome = Outcome::kept;
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;  // 1 where the token is a label the loss learns
};

// `render` may be empty (chat_template = "none"): prompt_completion is then prompt + completion
// + EOS, and messages are refused. Throws BadLine for a sample the template refuses.
Sample encode_record(const Record& record, const tok::Tokenizer& tokenizer, const RenderFn& render,
                     const EncodeOptions& options);

void check_encode_options(const EncodeOptions& options);

}  // namespace loom::sft
