// log.hpp: host logging through spdlog, on stderr. When stderr is a terminal each message
// first clears the line, so a tracker's live progress line never garbles a log line.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace loom {

// Installs the host logger; "[rank N] " goes before each line when world size > 1, and ranks
// other than 0 show only warnings and errors on the terminal.
void log_setup(int rank, int world_size, bool verbose);

// For a rank of a multi-process run: a copy of every line in `file`, from the first line this
// process logged (kept in memory until now: a rank writes no file before it may).
void log_join_run(int rank, int world_size, const std::string& file);

}  // namespace loom
