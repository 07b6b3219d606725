#include "config/resume_check.hpp"

#include <map>
#include <toml++/toml.h>

#include "base/failure.hpp"
#include "config/options.hpp"
#include "config/toml_guard.hpp"

namespace loom {
namespace {

// Keys whose change alters what the resumed run computes from here on.
const std::vector<std::string> kBreakingPrefixes = {"model.", "lora.", "data.", "run.seed", "run.grad_accum",
                                                    "run.global_batch_size"};

void flatten(const toml::node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (const auto* table = node.as_table()) {
    for (const auto& [key, value] : *table)
      flatten(value, prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str()), out);
  } else if (const auto* array = node.as_array()) {
    for (size_t i = 0; i < array->size(); ++i) flatten(*array->get(i), prefix + "." + std::to_string(i), out);
  } else {
    out[prefix] = to_toml_text(node);
  }
}

// Keys under a breaking prefix that still do not break a resume: init_from only seeds a new
// run's weights, and a resumed run takes them from its checkpoint.
const std::vector<std::string> kHarmlessKeys = {"model.init_from", "model.init_strict"};

bool breaking(const std::string& key) {
  for (const auto& k : kHarmlessKeys)
    if (key == k) return false;
  for (const auto& p : kBreakingPrefixes)
    if (key.rfind(p, 0) == 0) return true;
  return false;
}

// data.batch_size x run.grad_accum, or 0 when the batch size is not set there.
int64_t rows_per_rank(const std::map<std::string, std::string>& flat) {
  const auto number = [&](const char* key, int64_t fallback) {
    auto it = flat.find(key);
    if (it == flat.end()) return fallback;
    try {
      return static_cast<int64_t>(std::stoll(it->second));
    } catch (const std::exception&) {
      return int64_t{0};
    }
  };
  return number("data.batch_size", 0) * number("run.grad_accum", 1);
}

}  // namespace

std::vector<std::string> check_resume_manifest(const std::string& saved_toml, const std::string& current_toml,
                                               const std::string& checkpoint, int saved_world, int current_world) {
  std::map<std::string, std::string> saved, current;
  // The saved manifest comes from a checkpoint, which may come from anyone.
  if (const std::string unsafe = toml_unsafe_character(saved_toml); !unsafe.empty())
    throw usage_failure(checkpoint + ": its saved manifest cannot be read (" + unsafe + ")");
  flatten(toml::parse(saved_toml), "", saved);
  flatten(toml::parse(current_toml), "", current);
  const bool same_rows = saved_world != current_world &&
                         saved_world * rows_per_rank(saved) == current_world * rows_per_rank(current) &&
                         rows_per_rank(saved) > 0;
  std::vector<std::string> harmless;
  auto report = [&](const std::string& key, const std::string& before, const std::string& after) {
    const bool regrouped = same_rows && (key == "data.batch_size" || key == "run.grad_accum");
    if (breaking(key) && !regrouped)
      throw usage_failure(checkpoint + ": cannot resume: " + key + " was " + before + " and is now " + after +
                          ", which would not continue the same run; restore it, or start a new run "
                          "(another run.name, or [checkpoint] resume = \"none\" in a fresh directory)");
    harmless.push_back(key + ": " + before + " -> " + after);
  };
  for (const auto& [key, value] : saved) {
    auto it = current.find(key);
    if (it == current.end()) report(key, value, "(unset)");
    else if (it->second != value) report(key, value, it->second);
  }
  for (const auto& [key, value] : current)
    if (!saved.count(key)) report(key, "(unset)", value);
  return harmless;
}

}  // namespace loom
