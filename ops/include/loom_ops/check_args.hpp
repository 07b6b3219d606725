// check_args.hpp: how an op refuses what it cannot take. Its callers are Loom's own model and
// optimizer code, so a refusal is a bug there, not a user's mistake: one std::invalid_argument
// naming the op and what the argument must be, never a silently wrong result.
#pragma once

#include <stdexcept>
#include <string>

namespace loom_ops {

inline void check_arg(bool ok, const char* op, const std::string& requirement) {
  if (!ok) throw std::invalid_argument(std::string("loom_ops::") + op + ": " + requirement);
}

}  // namespace loom_ops
