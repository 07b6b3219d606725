// toml_guard.hpp: keeps text that would trip a bug of Debian 12's toml++ (3.3.0) away from it.
// toml++'s is_non_ascii_horizontal_whitespace() reaches TOML_UNREACHABLE (undefined behaviour:
// __builtin_unreachable in a release build) for the code points U+00A1-U+0499, U+2D6E-U+3167
// (but U+3000) and U+FB06-U+FEFE whenever the parser asks whether one of them is whitespace:
// anywhere outside strings and comments, and after a line-ending backslash in a multi-line
// basic string, and on error paths of malformed text. Found by the manifest fuzz target
// (tests/fuzz/regressions/manifest/). TOML allows non-ASCII characters only inside strings and
// comments, where the parser never asks, so a text holding them is first parsed with each
// replaced by '~' (a syntax error anywhere else): malformed text is refused with that error,
// and valid text is checked for the one place inside a string where the parser asks.
#pragma once

#include <string>
#include <string_view>

namespace loom {

// "line:col: ..." naming the first such character and what to do, or "" when the text is safe.
std::string toml_unsafe_character(std::string_view text);

}  // namespace loom
