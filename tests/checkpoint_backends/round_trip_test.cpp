// Both backends: what goes in comes back bit for bit (every ABI dtype, 0-d and empty tensors,
// special float values, metadata with escapes and non-ASCII), and what a failed write or a
// checkpoint from the other backend gives is one clear error.
#include <sys/stat.h>
#include <unistd.h>

#include "backend_harness.hpp"

using namespace loom_test;

namespace {
const char* const kBackends[] = {"safetensors", "torch_pickle"};
std::string file_of(const char* backend) {
  return std::string(backend) == "safetensors" ? "state.safetensors" : "state.pt";
}
}  // namespace

TEST_CASE("both backends round-trip every dtype, 0-d and empty tensors and the metadata bit for bit") {
  const loom::NamedTensors tensors = sample_tensors();
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    auto b = make_backend(backend);
    const fs::path dir = fresh_dir(std::string("round-trip-") + backend);
    b->save(dir.string(), tensors, sample_metadata());
    const loom::LoadedCheckpoint loaded = b->load(dir.string());
    check_same(tensors, loaded);
    CHECK(loaded.metadata_json == sample_metadata());
  }
}

TEST_CASE("both backends write the files they document, and nothing else") {
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    const fs::path dir = fresh_dir(std::string("files-") + backend);
    make_backend(backend)->save(dir.string(), sample_tensors(), "{}");
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    if (std::string(backend) == "safetensors") CHECK(names == std::vector<std::string>{"state.safetensors"});
    else CHECK(names == (std::vector<std::string>{"metadata.json", "state.pt"}));
  }
}

TEST_CASE("the file option renames the file; a path in it is refused at create") {
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    toml::table options{{"file", "weights.bin"}};
    const fs::path dir = fresh_dir(std::string("file-option-") + backend);
    auto b = make_backend(backend, options);
    b->save(dir.string(), sample_tensors(), "{\"k\":1}");
    CHECK(fs::exists(dir / "weights.bin"));
    CHECK(b->load(dir.string()).metadata_json == "{\"k\":1}");

    const Caught bad = catch_failure([&] { make_backend(backend, toml::table{{"file", "sub/state"}}); });
    CHECK(bad.code == static_cast<int>(loom::ExitCode::usage));
    CHECK(contains(bad.message, "plain file name"));
  }
}

TEST_CASE("a checkpoint with no tensors and empty metadata round-trips") {
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    auto b = make_backend(backend);
    const fs::path dir = fresh_dir(std::string("empty-") + backend);
    b->save(dir.string(), {}, "");
    const loom::LoadedCheckpoint loaded = b->load(dir.string());
    CHECK(loaded.tensors.empty());
    CHECK(loaded.metadata_json.empty());
  }
}

TEST_CASE("a few megabytes round-trip (the write loop crosses many pages)") {
  loom::NamedTensors tensors;
  tensors.emplace_back("big", random_bits(at::kFloat, {1024, 1031}, 7));
  tensors.emplace_back("tail", random_bits(at::kByte, {3}, 8));
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    auto b = make_backend(backend);
    const fs::path dir = fresh_dir(std::string("big-") + backend);
    b->save(dir.string(), tensors, "{}");
    check_same(tensors, b->load(dir.string()));
  }
}

TEST_CASE("loading a checkpoint written by the other backend is a clear error naming the files found") {
  const fs::path st = fresh_dir("cross-safetensors");
  const fs::path tp = fresh_dir("cross-torch_pickle");
  make_backend("safetensors")->save(st.string(), sample_tensors(), "{}");
  make_backend("torch_pickle")->save(tp.string(), sample_tensors(), "{}");

  const Caught a = catch_failure([&] { make_backend("safetensors")->load(tp.string()); });
  CHECK(a.code == static_cast<int>(loom::ExitCode::usage));
  CHECK(contains(a.message, (tp / "state.safetensors").string()));
  CHECK(contains(a.message, "state.pt"));
  CHECK(contains(a.message, "another backend"));

  const Caught b = catch_failure([&] { make_backend("torch_pickle")->load(st.string()); });
  CHECK(b.code == static_cast<int>(loom::ExitCode::usage));
  CHECK(contains(b.message, (st / "state.pt").string()));
  CHECK(contains(b.message, "state.safetensors"));
}

TEST_CASE("a write into a path under a regular file fails with the path and the reason (even as root)") {
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    const fs::path base = fresh_dir(std::string("under-file-") + backend);
    write_bytes(base / "plain", "x");
    const fs::path dir = base / "plain" / "sub";
    const Caught c = catch_failure([&] { make_backend(backend)->save(dir.string(), sample_tensors(), "{}"); });
    CHECK(c.code == static_cast<int>(loom::ExitCode::runtime));
    CHECK(contains(c.message, (dir / file_of(backend)).string()));
    CHECK(contains(c.message, "Not a directory"));
  }
}

TEST_CASE("a write into a read-only directory fails with the path and the reason") {
  if (::geteuid() == 0) {
    MESSAGE("skipped the chmod 0500 check: running as root, where directory permissions do not stop writes "
            "(the regular-file and /dev/full cases cover the failure path)");
    return;
  }
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    const fs::path dir = fresh_dir(std::string("read-only-") + backend);
    ::chmod(dir.c_str(), 0500);
    const Caught c = catch_failure([&] { make_backend(backend)->save(dir.string(), sample_tensors(), "{}"); });
    ::chmod(dir.c_str(), 0700);
    CHECK(c.code == static_cast<int>(loom::ExitCode::runtime));
    CHECK(contains(c.message, (dir / file_of(backend)).string()));
    CHECK(contains(c.message, "Permission denied"));
  }
}

TEST_CASE("a write onto a full disk (the file links to /dev/full) fails with the path and ENOSPC") {
  struct stat st {};
  if (::stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode)) {
    MESSAGE("skipped the full-disk check: this machine has no /dev/full");
    return;
  }
  for (const char* backend : kBackends) {
    CAPTURE(backend);
    const fs::path dir = fresh_dir(std::string("full-") + backend);
    fs::create_symlink("/dev/full", dir / file_of(backend));
    const Caught c = catch_failure([&] { make_backend(backend)->save(dir.string(), sample_tensors(), "{}"); });
    CHECK(c.code == static_cast<int>(loom::ExitCode::runtime));
    CHECK(contains(c.message, (dir / file_of(backend)).string()));
    CHECK(contains(c.message, "No space left on device"));
  }
}
