// chat_render.cpp: see chat_render.hpp.
#include "chat_render.hpp"

#include <stdexcept>

#include "chat/builtin_templates.hpp"
#include "chat/chat_template.hpp"
#include "formats/files.hpp"
#include "formats/format_error.hpp"

namespace loom::sft {

namespace {

constexpr uint64_t kMaxTemplateBytes = 1u << 20;

std::string template_source(const std::string& choice, const tok::Tokenizer& tokenizer, std::string& origin) {
  if (choice.empty()) {
    if (tokenizer.info().chat_template.empty())
      throw std::invalid_argument(tokenizer.info().source + " comes with no chat_template; set [data] chat_template to a "
                                  "built-in name (" + chat::builtin_template_names() + "), a .jinja file, or \"none\"");
    origin = "the tokenizer's chat_template";
    return tokenizer.info().chat_template;
  }
  if (const char* builtin = chat::builtin_chat_template(choice)) {
    origin = "the built-in \"" + choice + "\" template";
    return builtin;
  }
  try {
    origin = choice;
    return formats::read_text_file(choice, kMaxTemplateBytes);
  } catch (const formats::FormatError& e) {
    throw std::invalid_argument("chat_template \"" + choice + "\" is neither a built-in name (" +
                                chat::builtin_template_names() + ", none) nor a readable file: " + e.what());
  }
}

}  // namespace

ChatRenderer make_chat_renderer(const std::string& choice, const tok::Tokenizer& tokenizer) {
  ChatRenderer out;
  if (choice == "none") {
    out.origin = "no chat template";
    return out;
  }
  out.source = template_source(choice, tokenizer, out.origin);
  std::shared_ptr<const chat::ChatTemplate> compiled;
  try {
    compiled = std::make_shared<const chat::ChatTemplate>(out.source);
  } catch (const chat::TemplateError& e) {
    throw std::invalid_argument(out.origin + ": " + e.what() + "; set [data] chat_template to a built-in name (" +
                                chat::builtin_template_names() + ") instead");
  }
  const std::string bos = tokenizer.info().bos_token, eos = tokenizer.info().eos_token;
  out.render = [compiled, bos, eos](const std::vector<Message>& messages, bool add_generation_prompt) {
    nlohmann::json list = nlohmann::json::array();
    for (const Message& m : messages) list.push_back(m.extra);
    const nlohmann::json context = {{"messages", list}, {"add_generation_prompt", add_generation_prompt},
                                    {"bos_token", bos}, {"eos_token", eos}};
    try {
      return compiled->render(context);
    } catch (const chat::TemplateError& e) {
      throw BadLine(std::string("the chat template refused this conversation: ") + e.what());
    }
  };
  return out;
}

}  // namespace loom::sft
