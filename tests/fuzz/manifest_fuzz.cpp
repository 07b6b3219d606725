// manifest_fuzz.cpp: the TOML manifest loader, kernel/config/manifest.hpp load_manifest.
//
// The input is a manifest file. Lines that start with "#--set " (TOML comments, so the file stays
// what it was) are also passed as --set overrides, as `host run M --set KEY=VALUE` does. The
// scratch folder holds base.toml, so `extends = "base.toml"` has a base to follow.
// Documented refusal: loom::Failure. For a manifest that loads, every string, integer and
// boolean must survive the TOML writer the run folder's manifest.toml goes through
// (config/options.hpp to_toml_text) and read back equal.
#include <cmath>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "base/failure.hpp"
#include "config/manifest.hpp"
#include "config/options.hpp"
#include "fuzz_support.hpp"

namespace {

// to_toml_text(value) read back as TOML must be the same value.
template <class T>
void check_round_trip(const toml::node& node, const T& value) {
  const std::string text = "value = " + loom::to_toml_text(toml::value<T>(value));
  toml::table back;
  try {
    back = toml::parse(text);
  } catch (const toml::parse_error& e) {
    loom_fuzz::finding("to_toml_text wrote a value TOML cannot read back: " + text + " (" +
                       std::string(e.description()) + ") at " + loom::source_position(node));
  }
  const auto read = back["value"].value<T>();
  if (!read || *read != value) loom_fuzz::finding("to_toml_text changed a value: " + text);
}

void check_values(const toml::node& node, int depth) {
  if (depth > 64) return;  // toml++ itself limits nesting; this bounds the walk regardless
  if (const auto* table = node.as_table()) {
    for (const auto& [key, child] : *table) check_values(child, depth + 1);
  } else if (const auto* array = node.as_array()) {
    for (const auto& child : *array) check_values(child, depth + 1);
  } else if (const auto* s = node.as_string()) {
    check_round_trip<std::string>(node, s->get());
  } else if (const auto* i = node.as_integer()) {
    check_round_trip<int64_t>(node, i->get());
  } else if (const auto* b = node.as_boolean()) {
    check_round_trip<bool>(node, b->get());
  } else if (const auto* f = node.as_floating_point()) {
    // Floats are written with relaxed precision on purpose; they must still read back.
    const std::string text = "value = " + loom::to_toml_text(toml::value<double>(f->get()));
    try {
      (void)toml::parse(text);
    } catch (const toml::parse_error&) {
      loom_fuzz::finding("to_toml_text wrote a float TOML cannot read back: " + text);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string base = "[run]\nsteps = 3\nname = \"base\"\n[model]\nuse = \"mlp_lm\"\n";
  loom_fuzz::write_file(loom_fuzz::scratch_dir() / "base.toml", base.data(), base.size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line.rfind("#--set ", 0) == 0) overrides.push_back(line.substr(7));
    start = end + 1;
  }
  const auto path = loom_fuzz::scratch_dir() / "manifest.toml";
  loom_fuzz::write_file(path, data, size);
  loom_fuzz::expect_only<loom::Failure>("load_manifest", [&] {
    const loom::Manifest manifest = loom::load_manifest(path, overrides);
    check_values(manifest.root, 0);
  });
  return 0;
}
