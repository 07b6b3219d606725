// commands.hpp: the host's subcommands. Each returns the process exit code or throws Failure.
#pragma once

#include <string>
#include <vector>

namespace loom {

int command_run(const std::string& manifest, const std::vector<std::string>& overrides);
int command_validate(const std::string& manifest, const std::vector<std::string>& overrides);
int command_plugins(bool json);
int command_describe(const std::string& name);
int command_checkpoint_inspect(const std::string& dir, bool json);
int command_checkpoint_export(const std::string& dir, const std::string& format, const std::string& out);

}  // namespace loom
