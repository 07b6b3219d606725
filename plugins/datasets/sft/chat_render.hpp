// chat_render.hpp: the chat template a sample is rendered with, as the `sft` dataset's RenderFn.
// `choice` is what the manifest says: "" (the tokenizer folder's own template), "none", a
// built-in template's name (chat_template/builtin_templates.hpp), or a path to a .jinja file.
#pragma once

#include <memory>
#include <string>

#include "sft_encode.hpp"

namespace loom::sft {

struct ChatRenderer {
  RenderFn render;      // empty for "none"
  std::string source;   // the template text (part of the cache key)
  std::string origin;   // where it came from, for the log
};

// Throws std::invalid_argument naming the fix (a folder without a template, a bad file, a
// template the interpreter cannot parse: its line and construct).
ChatRenderer make_chat_renderer(const std::string& choice, const tok::Tokenizer& tokenizer);

}  // namespace loom::sft
