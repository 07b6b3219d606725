// The plugin logs through the host's spdlog logger; keep test output to warnings and errors.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  return doctest::Context(argc, argv).run();
}
