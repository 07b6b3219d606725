// reference_test.cpp: each real template renders every conversation of conversations.json to
// exactly the text transformers' apply_chat_template renders (render_reference.py); where the
// reference raises (raise_exception, a wrong role order), Loom raises too, with the same message.
// Prints the agreement per template.
#include <doctest/doctest.h>

#include <fstream>
#include <iostream>

#include "chat/chat_template.hpp"
#include "run_host.hpp"
#include "tokenizer_files.hpp"

namespace {

using nlohmann::json;

json conversations() {
  return json::parse(loom_test::read_file(std::string(LOOM_SOURCE_DIR) + "/tests/chat/conversations.json"));
}

void compare(const std::string& name) {
  const json config = json::parse(loom_test::read_file(loom_test::tokenizer_dir(name) + "/tokenizer_config.json"));
  REQUIRE(config["chat_template"].is_string());
  const std::string source = config["chat_template"].get<std::string>();
  json contexts = conversations();
  for (auto& context : contexts) {
    context["bos_token"] = config.value("bos_token", json("")).is_string() ? config["bos_token"] : json("");
    context["eos_token"] = config.value("eos_token", json("")).is_string() ? config["eos_token"] : json("");
  }
  const auto dir = loom_test::tmp_dir("chat_ref_" + name);
  std::ofstream(dir / "cases.json") << json{{"template", source}, {"contexts", contexts}}.dump();
  const auto r = loom_test::run_shell(std::string(LOOM_PYTHON) + " " + LOOM_SOURCE_DIR + "/tests/chat/render_reference.py " +
                                      (dir / "cases.json").string() + " " + (dir / "out.json").string());
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const json expected = json::parse(loom_test::read_file(dir / "out.json"));
  const loom::chat::ChatTemplate tmpl(source);
  size_t same = 0, errors = 0;
  for (size_t k = 0; k < contexts.size(); ++k) {
    CAPTURE(name);
    CAPTURE(k);
    std::string got, error;
    try {
      got = tmpl.render(contexts[k]);
    } catch (const loom::chat::TemplateError& e) {
      error = e.what();
    }
    if (expected[k].contains("error")) {
      ++errors;
      const std::string want = expected[k]["error"].get<std::string>();
      CHECK_MESSAGE(error.find(want) != std::string::npos, "reference raised \"" << want << "\", loom: \"" << error << "\"");
      same += error.find(want) != std::string::npos;
    } else {
      CHECK_MESSAGE(error.empty(), error);
      CHECK(got == expected[k]["text"].get<std::string>());
      same += error.empty() && got == expected[k]["text"].get<std::string>();
    }
  }
  std::cout << name << ": " << same << "/" << contexts.size() << " conversations identical to transformers (" << errors
            << " of them raise in both)\n";
}

}  // namespace

TEST_CASE("Qwen3's template renders as transformers does") { compare("qwen3"); }
TEST_CASE("Llama 3's template renders as transformers does") { compare("llama3"); }
TEST_CASE("Llama 3.1's template renders as transformers does") { compare("llama3_1"); }
TEST_CASE("Gemma 3's template renders as transformers does") { compare("gemma3"); }
TEST_CASE("Mistral Nemo's template renders as transformers does") { compare("mistral_nemo"); }
