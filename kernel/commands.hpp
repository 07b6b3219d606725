// commands.hpp: the host's subcommands. Each returns the process exit code or throws Failure.
#pragma once

#include <string>
#include <vector>

namespace loom {

int command_run(const std::string& manifest, const std::vector<std::string>& overrides);
int command_validate(const std::string& manifest, const std::vector<std::string>& overrides);
int command_plugins(bool json);
// NAME is a component or a host table (run, checkpoint, trackers, eval_data, distributed);
// `all` describes every one of them, as Markdown with `markdown`.
int command_describe(const std::string& name, bool all, bool markdown);
struct LaunchOptions {
  int nproc_per_node = 1, nnodes = 1, node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port (single node only)
};
int command_launch(const LaunchOptions& options, const std::vector<std::string>& child_args);
int command_checkpoint_inspect(const std::string& dir, bool json);
int command_checkpoint_export(const std::string& dir, const std::string& format, const std::string& out);

}  // namespace loom
