// The torch_pickle backend: Python's torch.load opens what it writes (when a python3 with torch
// is installed), and a truncated or damaged archive is one clear error, never a crash.
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdlib>
#include <map>
#include <sstream>

#include "backend_harness.hpp"
#include "python_torch.hpp"

using namespace loom_test;

namespace {

// "name|dtype|[d0, d1]|crc32" for one tensor, as the Python script below prints it.
std::string describe(const std::string& name, const at::Tensor& t) {
  std::string dtype = c10::toString(t.scalar_type());
  const std::map<std::string, std::string> python_names = {
      {"Float", "float32"}, {"Double", "float64"}, {"Half", "float16"}, {"BFloat16", "bfloat16"},
      {"Long", "int64"},    {"Int", "int32"},      {"Byte", "uint8"}};
  REQUIRE(python_names.count(dtype));
  std::ostringstream out;
  out << name << "|" << python_names.at(dtype) << "|[";
  for (int64_t i = 0; i < t.dim(); ++i) out << (i ? ", " : "") << t.size(i);
  out << "]|" << crc32(t.data_ptr(), t.nbytes());
  return out.str();
}

Caught load_error(const fs::path& dir) {
  return catch_failure([&] { make_backend("torch_pickle")->load(dir.string()); });
}

}  // namespace

TEST_CASE("torch_pickle: Python's torch.load reads state.pt as a dict of the same tensors") {
  std::string tried;
  const std::string python = python_with_torch(tried);
  if (python.empty()) {
    MESSAGE("skipped the Python torch.load check: no python3 with torch found (tried " << tried
                                                                                        << "; set LOOM_TEST_PYTHON)");
    return;
  }
  const fs::path dir = fresh_dir("tp-python");
  const loom::NamedTensors tensors = sample_tensors();
  make_backend("torch_pickle")->save(dir.string(), tensors, sample_metadata());
  const fs::path script = dir.parent_path() / "tp-python-load.py";
  write_bytes(script,
              "import json, sys, zlib\n"
              "import torch\n"
              "state = torch.load(sys.argv[1])\n"
              "assert type(state) is dict, type(state)\n"
              "for name, t in state.items():\n"
              "    raw = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()\n"
              "    print('%s|%s|%s|%d' % (name, str(t.dtype).replace('torch.', ''), list(t.shape), zlib.crc32(raw)))\n"
              "meta = json.load(open(sys.argv[2], encoding='utf-8'))\n"
              "print('metadata|%s|%s' % (meta['step'], meta['nested']['a']))\n");
  const Result r = run_shell(python + " " + script.string() + " " + (dir / "state.pt").string() + " " +
                             (dir / "metadata.json").string());
  INFO("python stderr: " << r.err);
  REQUIRE(r.code == 0);
  std::string expected;
  for (const auto& [name, tensor] : tensors) expected += describe(name, tensor) + "\n";  // insertion order
  expected += "metadata|1234|[1, 2.5, None, True]\n";
  CHECK(r.out == expected);
  MESSAGE("python (" << python << ") torch.load of state.pt:\n" << r.out);
}

TEST_CASE("torch_pickle: truncated, flipped and foreign files are clear errors") {
  const fs::path dir = fresh_dir("tp-corrupt");
  make_backend("torch_pickle")->save(dir.string(), sample_tensors(), sample_metadata());
  const fs::path path = dir / "state.pt";
  const std::string good = read_bytes(path);
  const auto expect_error = [&](const char* phrase) {
    const Caught c = load_error(dir);
    CHECK(c.code == static_cast<int>(loom::ExitCode::runtime));
    CHECK_MESSAGE(contains(c.message, path.string()), c.message);
    CHECK_MESSAGE(contains(c.message, phrase), c.message);
  };

  SUBCASE("half the file") {
    write_bytes(path, good.substr(0, good.size() / 2));
    expect_error("corrupt or truncated");
  }
  SUBCASE("the last byte is missing") {
    write_bytes(path, good.substr(0, good.size() - 1));
    expect_error("corrupt or truncated");
  }
  SUBCASE("an empty file") {
    write_bytes(path, "");
    expect_error("corrupt or truncated");
  }
  SUBCASE("text instead of an archive") {
    write_bytes(path, "{\"not\": \"an archive\"}");
    expect_error("corrupt or truncated");
  }
  SUBCASE("an archive that holds a tensor, not a dict") {
    const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(at::ones({2})));
    write_bytes(path, std::string(bytes.begin(), bytes.end()));
    expect_error("not a dict of tensors");
  }
  SUBCASE("the metadata file is missing: the tensors load, the host gets no metadata") {
    fs::remove(dir / "metadata.json");
    const loom::LoadedCheckpoint loaded = make_backend("torch_pickle")->load(dir.string());
    CHECK(loaded.tensors.size() == sample_tensors().size());
    CHECK(loaded.metadata_json.empty());
  }
}

TEST_CASE("torch_pickle: truncations and flipped bytes across the archive are errors or clean loads, never a crash") {
  const fs::path dir = fresh_dir("tp-fuzz");
  make_backend("torch_pickle")->save(dir.string(), sample_tensors(), "{}");
  const fs::path path = dir / "state.pt";
  const std::string good = read_bytes(path);
  // Positions spread evenly over the file. Not every byte: each refusal costs LibTorch ~50 ms
  // (c10::Error records a symbolized backtrace).
  const auto positions = [&](size_t count) {
    std::vector<size_t> out;
    for (size_t k = 0; k < count; ++k) out.push_back(good.size() * k / count);
    return out;
  };

  for (size_t length : positions(40)) {
    CAPTURE(length);
    write_bytes(path, good.substr(0, length));
    CHECK(load_error(dir).code == static_cast<int>(loom::ExitCode::runtime));
  }

  int refused = 0;
  const std::vector<size_t> flips = positions(120);
  for (size_t i : flips) {
    std::string bad = good;
    bad[i] = char(bad[i] ^ 0x5A);
    write_bytes(path, bad);
    const Caught c = load_error(dir);
    CHECK((c.code == 0 || c.code == static_cast<int>(loom::ExitCode::runtime)));
    refused += c.code != 0;
  }
  // LibTorch does not verify the zip's CRC-32 of the tensor records, so a flipped data byte
  // loads, changed; the manager's index checksums are what catch it.
  MESSAGE("torch_pickle: flipped bytes refused by LibTorch: " << refused << " of " << flips.size());
}
