// host: the Loom command-line program. It parses the command line, dispatches to a command
// and turns every failure into one line on stderr plus a documented exit code.
#include <boost/program_options.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "failure.hpp"
#include "host_api.hpp"
#include "log.hpp"

namespace po = boost::program_options;

namespace {

const char* kUsage = R"(usage: host <command> [options]

commands:
  run MANIFEST [--set KEY=VALUE]...       train as the manifest says
  validate MANIFEST [--set KEY=VALUE]...  check a manifest and print it resolved
  plugins [--json]                        list plugins, their components and load errors
  describe NAME                           show a component's options, or a host table's:
                                          run, checkpoint, trackers, eval_data, distributed
  describe --all [--markdown]             every host table and component (README's reference)
  launch --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P] -- run MANIFEST ...
                                          start N ranks of a data-parallel run on this node
  checkpoint inspect DIR [--json]         list a checkpoint's tensors, step and validity
  checkpoint export DIR --format hf-safetensors [--out FILE]
                                          write the model weights alone (default model.safetensors)

options:
  --set KEY=VALUE   override a manifest value, e.g. --set optimizer.lr=1e-3 --set run.steps=50
  --verbose         debug logging
  --version         print versions and exit
  --help            print this help and exit

Plugins are searched in the manifest's [plugins] paths, then LOOM_PLUGIN_PATH, then the
folder ../lib/loom/plugins beside this binary.

exit codes: 0 success, 1 runtime failure, 2 bad manifest or usage, 3 plugin load or ABI error
)";

// The first line only: LibTorch appends stack traces to what().
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

int dispatch(int argc, char** argv) {
  po::options_description options;
  std::vector<std::string> overrides;
  std::vector<std::string> positional;
  std::string format = "hf-safetensors", out = "model.safetensors";
  loom::LaunchOptions launch;
  options.add_options()("help,h", "")("version", "")("verbose,v", "")("json", "")("all", "")("markdown", "")(
      "set", po::value<std::vector<std::string>>(&overrides)->composing(), "")(
      "args", po::value<std::vector<std::string>>(&positional), "")(
      "format", po::value<std::string>(&format), "")("out,o", po::value<std::string>(&out), "")(
      "nproc-per-node", po::value<int>(&launch.nproc_per_node), "")("nnodes", po::value<int>(&launch.nnodes), "")(
      "node-rank", po::value<int>(&launch.node_rank), "")("master-addr", po::value<std::string>(&launch.master_addr), "")(
      "master-port", po::value<int>(&launch.master_port), "");
  po::positional_options_description slots;
  slots.add("args", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(options).positional(slots).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw loom::usage_failure(std::string(e.what()) + "; see host --help");
  }
  loom::log_setup(0, 1, vm.count("verbose") > 0);
  if (vm.count("help") || (positional.empty() && !vm.count("version"))) {
    std::cout << kUsage;
    return positional.empty() && !vm.count("help") ? 2 : 0;
  }
  if (vm.count("version")) {
    std::cout << "loom host " << LOOM_VERSION << " (plugin ABI " << LOOM_ABI_MAJOR << "." << LOOM_ABI_MINOR
              << ", " << loom::host_torch_fingerprint() << ")\n";
    return 0;
  }
  const std::string command = positional[0];
  const auto expect_args = [&](size_t n, const char* form) {
    if (positional.size() != n + 1) throw loom::usage_failure(std::string("usage: host ") + form);
  };
  if (command == "launch") return loom::command_launch(launch, {positional.begin() + 1, positional.end()});
  if ((command != "run" && command != "validate") && !overrides.empty())
    throw loom::usage_failure("--set only applies to run and validate");
  if (command == "run") {
    expect_args(1, "run MANIFEST [--set KEY=VALUE]...");
    return loom::command_run(positional[1], overrides);
  }
  if (command == "validate") {
    expect_args(1, "validate MANIFEST [--set KEY=VALUE]...");
    return loom::command_validate(positional[1], overrides);
  }
  if (command == "plugins") {
    expect_args(0, "plugins [--json]");
    return loom::command_plugins(vm.count("json") > 0);
  }
  if (command == "describe") {
    const bool all = vm.count("all") > 0;
    expect_args(all ? 0 : 1, "describe NAME | describe --all [--markdown]");
    return loom::command_describe(all ? "" : positional[1], all, vm.count("markdown") > 0);
  }
  if (command == "checkpoint" && positional.size() >= 2 && positional[1] == "inspect") {
    expect_args(2, "checkpoint inspect DIR [--json]");
    return loom::command_checkpoint_inspect(positional[2], vm.count("json") > 0);
  }
  if (command == "checkpoint" && positional.size() >= 2 && positional[1] == "export") {
    expect_args(2, "checkpoint export DIR --format hf-safetensors [--out FILE]");
    return loom::command_checkpoint_export(positional[2], format, out);
  }
  if (command == "checkpoint")
    throw loom::usage_failure("usage: host checkpoint inspect DIR [--json] | host checkpoint export DIR --format "
                              "hf-safetensors [--out FILE]");
  throw loom::usage_failure("unknown command \"" + command +
                            "\"; commands: run, validate, plugins, describe, checkpoint, launch");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
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
