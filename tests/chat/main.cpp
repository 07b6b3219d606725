// main.cpp: finds the real chat templates (each tokenizer_config.json's chat_template) once, then
// runs the doctest cases; exit code 77 (skipped) when the tokenizer files are absent.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tokenizer_files.hpp"

int main(int argc, char** argv) {
  for (const char* name : {"qwen3", "llama3", "llama3_1", "gemma3", "mistral_nemo"}) loom_test::tokenizer_dir(name);
  doctest::Context context(argc, argv);
  return context.run();
}
