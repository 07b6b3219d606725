// Option validation: unknown keys, types, required options and defaults.
#include <doctest/doctest.h>

#include "base/failure.hpp"
#include "config/options.hpp"

using namespace loom;

namespace {
std::vector<OptionSpec> specs() {
  return {{"lr", LOOM_OPTION_TYPE_FLOAT, "0.001", false, "learning rate"},
          {"steps", LOOM_OPTION_TYPE_INT, "10", false, "steps"},
          {"path", LOOM_OPTION_TYPE_STRING, std::nullopt, true, "where"},
          {"flag", LOOM_OPTION_TYPE_BOOL, "false", false, "a flag"}};
}

std::string failure_of(const std::string& toml_text) {
  const toml::table table = toml::parse(std::string_view(toml_text), std::string_view("m.toml"));
  try {
    resolve_options(table, specs(), "[x] comp", "see `host describe comp`", {"use"});
  } catch (const Failure& f) {
    CHECK(f.code() == ExitCode::usage);
    return f.what();
  }
  return "";
}
}  // namespace

TEST_CASE("did_you_mean suggests the closest name and nothing when all are far") {
  CHECK(did_you_mean("lrr", {"lr", "steps"}) == "; did you mean \"lr\"?");
  CHECK(did_you_mean("weight_decya", {"weight_decay", "lr"}) == "; did you mean \"weight_decay\"?");
  CHECK(did_you_mean("zzzzzz", {"lr", "steps"}).empty());
}

TEST_CASE("defaults fill in, ints widen to floats, use is reserved") {
  const toml::table t = toml::parse(std::string_view("use = \"comp\"\npath = \"a\"\nlr = 1\n"), std::string_view("m.toml"));
  auto v = resolve_options(t, specs(), "[x] comp", "", {"use"});
  CHECK(std::get<double>(v["lr"]) == 1.0);
  CHECK(std::get<int64_t>(v["steps"]) == 10);
  CHECK(std::get<bool>(v["flag"]) == false);
  CHECK(std::get<std::string>(v["path"]) == "a");
  CHECK(v.count("use") == 0);
}

TEST_CASE("unknown key names the position and suggests the fix") {
  const std::string m = failure_of("path = \"a\"\nlrr = 0.1\n");
  CHECK(m.find("m.toml:2:1") != std::string::npos);
  CHECK(m.find("unknown option \"lrr\"; did you mean \"lr\"?") != std::string::npos);
  CHECK(m.find("host describe comp") != std::string::npos);
}

TEST_CASE("wrong type names the position and both types") {
  const std::string m = failure_of("path = \"a\"\nsteps = \"ten\"\n");
  CHECK(m.find("m.toml:2:9") != std::string::npos);
  CHECK(m.find("must be int, not string") != std::string::npos);
}

TEST_CASE("missing required option says what to add") {
  const std::string m = failure_of("lr = 0.1\n");
  CHECK(m.find("missing required option \"path\"") != std::string::npos);
  CHECK(m.find("add path = ...") != std::string::npos);
}

TEST_CASE("format_option_value writes TOML literals") {
  CHECK(format_option_value(OptionValue{int64_t{3}}) == "3");
  CHECK(format_option_value(OptionValue{true}) == "true");
  CHECK(format_option_value(OptionValue{std::string("a\"b")}) == "\"a\\\"b\"");
}

TEST_CASE("a list option takes an array of strings, defaults to empty, and refuses anything else") {
  OptionSpec list{"freeze", LOOM_OPTION_TYPE_STRING, "[]", false, "patterns"};
  list.list = true;
  const auto resolve = [&](const std::string& text) {
    const toml::table t = toml::parse(std::string_view(text), std::string_view("m.toml"));
    return resolve_options(t, {list}, "[model]", "see `host describe model`", {});
  };
  CHECK(std::get<std::vector<std::string>>(resolve("")["freeze"]).empty());
  CHECK(std::get<std::vector<std::string>>(resolve("freeze = [\"embed\", \"layers.0.\"]\n")["freeze"]) ==
        std::vector<std::string>{"embed", "layers.0."});
  CHECK(format_option_value(resolve("freeze = [\"a\", \"b\"]\n")["freeze"]) == "[ \"a\", \"b\" ]");
  for (const char* bad : {"freeze = \"embed\"\n", "freeze = [\"a\", 3]\n"}) {
    CAPTURE(bad);
    try {
      resolve(bad);
      FAIL("accepted");
    } catch (const Failure& f) {
      CHECK(std::string(f.what()).find("m.toml:1:10: [model]: option \"freeze\" must be an array of strings") !=
            std::string::npos);
    }
  }
  CHECK(option_type_name(list) == "strings");
}
