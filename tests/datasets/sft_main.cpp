// sft_main.cpp: finds the real Qwen3 tokenizer files once, then runs the cases (sft_tests and
// parquet_tests); exit code 77 (skipped) when they are absent.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tokenizer_files.hpp"

int main(int argc, char** argv) {
  loom_test::tokenizer_dir("qwen3");
  doctest::Context context(argc, argv);
  return context.run();
}
