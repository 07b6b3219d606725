// fuzz_support.hpp: what the fuzz targets share. The readers under test take paths, as users give
// them files, so each input is written to a file in a scratch folder of this process's own
// (made on first use under $TMPDIR or /tmp, removed at a normal exit). A target accepts only
// the reader's documented error type; finding() reports anything else and aborts, which
// libFuzzer records as a crash and the replay test as a failure.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cxxabi.h>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <typeinfo>

namespace loom_fuzz {

// The scratch folder, created once per process. Never destroyed (the exit handler needs it).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/loom-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("loom fuzz: mkdtemp");
      std::abort();
    }
    return new std::filesystem::path(pattern);
  }();
  static const bool cleanup = [] {
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*dir, ec);
    });
    return true;
  }();
  (void)cleanup;
  return *dir;
}

// Writes bytes to path, replacing it. A failure here is the harness's, not the reader's: abort.
inline void write_file(const std::filesystem::path& path, const void* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(("loom fuzz: cannot write " + path.string()).c_str());
    std::abort();
  }
}

// Reports a finding (an error the reader does not document, a broken invariant) and aborts.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "\nloom fuzz: FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// The dynamic type of the exception being handled, demangled, for finding() messages.
inline std::string current_exception_type() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type == nullptr) return "unknown";
  int status = 0;
  char* name = abi::__cxa_demangle(type->name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name ? name : type->name();
  std::free(name);
  return out;
}

// Keeps a value computed from what a reader returned, so the reads that made it are not optimized away.
inline volatile size_t g_sink = 0;
inline void keep(size_t value) { g_sink = value; }

// For expect_only<NoException>: a reader documented never to throw.
struct NoException {};

// Runs fn; the exception type E is the reader's documented refusal and is swallowed; any other
// exception is a finding.
template <class E, class Fn>
void expect_only(const char* reader, Fn&& fn) {
  try {
    fn();
  } catch (const E&) {
  } catch (const std::exception& e) {
    finding(std::string(reader) + " threw " + current_exception_type() + " (not its documented error type): " + e.what());
  } catch (...) {
    finding(std::string(reader) + " threw " + current_exception_type() + ", which is not a std::exception");
  }
}

}  // namespace loom_fuzz
