// template_error.hpp: what the chat template interpreter throws: one line, "chat template line
// N: what is wrong" (line 0 when no line applies, e.g. raise_exception's own message).
#pragma once

#include <stdexcept>
#include <string>

namespace loom::chat {

struct TemplateError : std::runtime_error {
  TemplateError(int line, const std::string& what)
      : std::runtime_error(line > 0 ? "chat template line " + std::to_string(line) + ": " + what : what), line(line) {}
  int line;
};

}  // namespace loom::chat
