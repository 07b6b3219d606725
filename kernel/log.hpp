// log.hpp: host logging through spdlog, on stderr. When stderr is a terminal each message
// first clears the line, so a tracker's live progress line never garbles a log line.
#pragma once

#include <spdlog/spdlog.h>

namespace loom {

// Installs the host logger; rank_prefix is printed before each line when world size > 1.
void log_setup(int rank, int world_size, bool verbose);

}  // namespace loom
