// interpreter.hpp: runs a parsed template against a context. Scopes follow the reference: a for
// loop has its own scope (a `set` inside it does not leak out), `if` does not; namespaces are the
// way to carry values out of a loop. Limits on nesting, steps and output size make a hostile
// template fail with a TemplateError rather than hang or exhaust memory.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ast.hpp"

namespace loom::chat {

std::string render_program(const Block& program, const nlohmann::json& context);

}  // namespace loom::chat
