// cross_checks.hpp: what no single table can see wrong: options of two sections that do not fit
// together, and a run folder that cannot be written. Each problem is one message that names
// where (file:line:col when there is one) and the fix.
#pragma once

#include <string>
#include <vector>

#include "config/manifest.hpp"
#include "train/run_plan.hpp"

namespace loom {

// The problems of a resolved plan; empty when none. Skips sections that did not resolve.
std::vector<std::string> cross_section_problems(const RunPlan& plan, const Manifest& manifest);

}  // namespace loom
