// check_args.hpp: how an op refuses what it cannot take. Its callers are Loom's own model and
// optimizer code, so a refusal is a bug there, not a user's mistake: one std::invalid_argument
// naming the op and what the argument must be, never a silently wrong result.
//
// The checks run on every call, many times a step, so a passing check builds nothing: the
// requirement is a string literal, or a callable that writes the message (with the values it
// names) only when the check fails.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace loom_ops {

[[noreturn]] inline void refuse_arg(const char* op, const std::string& requirement) {
  throw std::invalid_argument(std::string("loom_ops::") + op + ": " + requirement);
}

inline void check_arg(bool ok, const char* op, const char* requirement) {
  if (!ok) refuse_arg(op, requirement);
}

template <class Describe>
void check_arg(bool ok, const char* op, Describe&& describe) {
  if (!ok) refuse_arg(op, std::forward<Describe>(describe)());
}

}  // namespace loom_ops
