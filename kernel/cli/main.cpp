// host: the Loom command-line program. It finds the command in the command table
// (command_table.cpp), runs it, and turns every failure into one line on stderr plus a
// documented exit code (README "Exit codes").
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "abi/host_api.hpp"
#include "base/cpu_threads.hpp"
#include "base/failure.hpp"
#include "base/log.hpp"
#include "cli/commands.hpp"

namespace {

// The first line only: LibTorch appends stack traces to what().
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

int dispatch(const std::vector<std::string>& argv) {
  loom::CommandLine line;
  bool version = false;
  const loom::Command* command = loom::parse_command_line(argv, line, version);
  loom::log_setup(0, 1, line.verbose);
  if (version) {
    std::cout << "loom host " << LOOM_VERSION << " (plugin ABI " << LOOM_ABI_MAJOR << "." << LOOM_ABI_MINOR
              << ", " << loom::host_torch_fingerprint() << ")\n";
    return 0;
  }
  if (!command) {  // `host --help`, or no command at all
    std::cout << loom::global_help();
    return line.help ? 0 : static_cast<int>(loom::ExitCode::usage);
  }
  if (line.help) {
    std::cout << loom::command_help(*command);
    return 0;
  }
  return command->handler(line);
}

}  // namespace

int main(int argc, char** argv) {
  loom::settle_thread_environment(argv);  // may restart the process under another OpenMP wait policy
  try {
    return dispatch(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const loom::Failure& f) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", first_line(f.what()).c_str());
    return static_cast<int>(f.code());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: internal: %s\n", first_line(e.what()).c_str());
    return static_cast<int>(loom::ExitCode::runtime);
  }
}
