// format_error.hpp: the one exception the format readers and writers throw. The message is a
// complete sentence naming the file and what is wrong with it; callers add their own prefix
// (the component or command) and turn it into their error type and exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace loom::formats {

class FormatError : public std::runtime_error {
 public:
  enum class Kind {
    invalid,    // the file exists but its content breaks the format (or names files it may not)
    not_found,  // a file the format needs is missing
    io,         // the operating system refused (permissions, disk full)
  };
  FormatError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

[[noreturn]] inline void invalid(const std::string& message) { throw FormatError(FormatError::Kind::invalid, message); }

}  // namespace loom::formats
