// chat_template.hpp: Hugging Face chat templates (the Jinja `chat_template` of
// tokenizer_config.json) rendered in C++, with output identical to @huggingface/jinja, the
// reference transformers.js uses; no Python at run time.
//
//   loom::chat::ChatTemplate t(source);                 // parses once; TemplateError if it cannot
//   std::string text = t.render({{"messages", ...}, {"add_generation_prompt", true},
//                                {"bos_token", "<s>"}, {"eos_token", "</s>"}});
//
// The subset is what real templates use (chat/README.md): text, {{ }}, {% %} with set, if,
// for, break and continue, whitespace control, filters, tests, string and mapping methods,
// namespace(), raise_exception(). Anything else is one TemplateError naming the template line
// and the construct ("chat template line 3: unsupported tag 'macro'").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ast.hpp"
#include "template_error.hpp"

namespace loom::chat {

class ChatTemplate {
 public:
  explicit ChatTemplate(const std::string& source);
  // Thread-safe: rendering does not change the template.
  std::string render(const nlohmann::json& context) const;

 private:
  Block program_;
};

}  // namespace loom::chat
