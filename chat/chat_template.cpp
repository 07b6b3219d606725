// chat_template.cpp: see chat_template.hpp.
#include "chat_template.hpp"

#include "interpreter.hpp"
#include "lexer.hpp"
#include "parser.hpp"

namespace loom::chat {

ChatTemplate::ChatTemplate(const std::string& source) : program_(parse(tokenize(source))) {}

std::string ChatTemplate::render(const nlohmann::json& context) const { return render_program(program_, context); }

}  // namespace loom::chat
