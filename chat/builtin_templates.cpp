// builtin_templates.cpp: see builtin_templates.hpp.
#include "builtin_templates.hpp"

namespace loom::chat {

namespace {

struct Builtin {
  const char* name;
  const char* source;
};

const Builtin kBuiltins[] = {
    {"chatml",
     "{%- for message in messages %}"
     "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
     "{%- endfor %}"
     "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"},
    {"llama3",
     "{{- bos_token }}"
     "{%- for message in messages %}"
     "{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + message.content | trim + '<|eot_id|>' }}"
     "{%- endfor %}"
     "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"},
};

}  // namespace

const char* builtin_chat_template(std::string_view name) {
  for (const Builtin& b : kBuiltins)
    if (name == b.name) return b.source;
  return nullptr;
}

std::string builtin_template_names() {
  std::string out;
  for (const Builtin& b : kBuiltins) out += (out.empty() ? "" : ", ") + std::string(b.name);
  return out;
}

}  // namespace loom::chat
