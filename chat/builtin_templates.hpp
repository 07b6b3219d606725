// builtin_templates.hpp: chat templates Loom ships, for tokenizers without one (base models) or
// whose own template the interpreter refuses. Written from the published formats:
//   chatml  <|im_start|>ROLE\nCONTENT<|im_end|>\n per message; "<|im_start|>assistant\n" to answer
//           (Qwen, many fine-tunes)
//   llama3  BOS, then <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> per message
//           (content trimmed); "<|start_header_id|>assistant<|end_header_id|>\n\n" to answer
#pragma once

#include <string>
#include <string_view>

namespace loom::chat {

// The template's source, or nullptr when `name` is not a built-in template.
const char* builtin_chat_template(std::string_view name);

// "chatml, llama3": for messages that list the choices.
std::string builtin_template_names();

}  // namespace loom::chat
