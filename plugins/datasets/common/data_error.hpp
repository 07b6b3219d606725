// data_error.hpp: the one exception the shared dataset code (common/) throws, so the dataset
// plugins and loom-tokenize can each map it to their own error convention: a plugin to a
// loom::Error status, the tool to an exit code. Torch-free and SDK-free.
#pragma once

#include <stdexcept>
#include <string>

namespace loom::data {

class DataError : public std::runtime_error {
 public:
  enum class Kind {
    bad_input,  // the user can fix it: missing file, wrong format, bad option (exit code 2)
    io,         // the system failed: read, write or map error on a valid input (exit code 1)
  };
  DataError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

inline DataError bad_input(const std::string& message) { return DataError(DataError::Kind::bad_input, message); }
inline DataError io_error(const std::string& message) { return DataError(DataError::Kind::io, message); }

}  // namespace loom::data
