// sft_files.hpp: where sft_main.cpp put the npm files the sft tests use.
#pragma once

#include <string>

namespace loom_test {

struct SftFiles {
  std::string qwen3;    // folder with the real Qwen3 tokenizer.json and tokenizer_config.json
  std::string modules;  // node_modules with @lenml/tokenizers and @huggingface/jinja
};

SftFiles& sft_files();

}  // namespace loom_test
