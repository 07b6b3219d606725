// resume_check.hpp: compares the manifest a checkpoint was written with against the one
// resuming it. Changes that would break exact continuation are errors naming the key; the
// rest (steps, logging, trackers, hooks, optimizer settings) are allowed and reported.
#pragma once

#include <string>
#include <vector>

namespace loom {

// Both arguments are resolved manifests as TOML text. Returns the harmless differences as
// "key: old -> new"; throws a usage Failure for the first breaking one. Across world sizes
// (saved_world != current_world), data.batch_size and run.grad_accum may change together with
// the world size as long as the rows per step (world x batch x accumulation) stay the same.
std::vector<std::string> check_resume_manifest(const std::string& saved_toml, const std::string& current_toml,
                                               const std::string& checkpoint, int saved_world = 1,
                                               int current_world = 1);

}  // namespace loom
