// failure.hpp: the one exception type inside the host. It carries the exit code the CLI
// returns and a message that is already one complete line for the user.
#pragma once

#include <stdexcept>
#include <string>

namespace loom {

// Documented in README "Exit codes".
enum class ExitCode : int {
  ok = 0,
  runtime = 1,   // training failed: a plugin callback errored, non-finite loss abort, I/O
  usage = 2,     // bad command line, manifest or input file (a checkpoint, a model folder, data)
  plugin = 3,    // a plugin could not be loaded or was refused (ABI, fingerprint, duplicate)
};

class Failure : public std::runtime_error {
 public:
  Failure(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// A manifest names a component that no loaded plugin offers.
class UnknownComponent : public Failure {
 public:
  explicit UnknownComponent(const std::string& m) : Failure(ExitCode::usage, m) {}
};

inline Failure usage_failure(const std::string& m) { return Failure(ExitCode::usage, m); }
inline Failure plugin_failure(const std::string& m) { return Failure(ExitCode::plugin, m); }
inline Failure runtime_failure(const std::string& m) { return Failure(ExitCode::runtime, m); }

}  // namespace loom
