// The torch_pickle backend: Python's torch.load opens what it writes, with weights_only=True
// (when a python3 with torch is installed), it reads what Python's torch.save writes, and a
// truncated, damaged or hostile archive is one clear error (exit code 2), never a crash.
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <fstream>
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

TEST_CASE("torch_pickle: Python's torch.load(weights_only=True) reads state.pt as a dict of the same tensors") {
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
              "state = torch.load(sys.argv[1], weights_only=True)  # PyTorch's own restricted unpickler\n"
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
    CHECK(c.code == static_cast<int>(loom::ExitCode::usage));
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
    CHECK(load_error(dir).code == static_cast<int>(loom::ExitCode::usage));
  }

  int refused = 0;
  const std::vector<size_t> flips = positions(120);
  for (size_t i : flips) {
    std::string bad = good;
    bad[i] = char(bad[i] ^ 0x5A);
    write_bytes(path, bad);
    const Caught c = load_error(dir);
    CHECK((c.code == 0 || c.code == static_cast<int>(loom::ExitCode::usage)));
    refused += c.code != 0;
  }
  // LibTorch does not verify the zip's CRC-32 of the tensor records, so a flipped data byte
  // loads, changed; the manager's index checksums are what catch it.
  MESSAGE("torch_pickle: flipped bytes refused by LibTorch: " << refused << " of " << flips.size());
}

TEST_CASE("torch_pickle: files Python's torch.save wrote load with the same values (views, parameters, state_dict)") {
  std::string tried;
  const std::string python = python_with_torch(tried);
  if (python.empty()) {
    MESSAGE("skipped: no python3 with torch found (tried " << tried << "; set LOOM_TEST_PYTHON)");
    return;
  }
  const fs::path dir = fresh_dir("tp-from-python");
  const fs::path script = dir.parent_path() / "tp-python-save.py";
  // A transposed view and a slice share one storage; a Parameter; a state_dict() (an
  // OrderedDict carrying _metadata); every dtype the ABI carries. Prints name|crc32 of each
  // tensor's contiguous bytes.
  write_bytes(script,
              "import sys, zlib, torch\n"
              "torch.manual_seed(3)\n"
              "base = torch.randn(6, 5)\n"
              "state = torch.nn.Linear(5, 3).state_dict()\n"
              "state['transposed'] = base.t()\n"
              "state['slice'] = base[2:5, 1:4]\n"
              "state['param'] = torch.nn.Parameter(torch.randn(4))\n"
              "state['scalar'] = torch.tensor(-7, dtype=torch.int64)\n"
              "state['empty'] = torch.zeros(0, 3)\n"
              "for i, dt in enumerate([torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int16, torch.int8, torch.uint8]):\n"
              "    state['dtype%d' % i] = (torch.randn(3, 2) * 50).to(dt)\n"
              "torch.save(state, sys.argv[1])\n"
              "for name, t in state.items():\n"
              "    raw = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()\n"
              "    print('%s|%s|%d' % (name, list(t.shape), zlib.crc32(raw)))\n");
  const Result r = run_shell(python + " " + script.string() + " " + (dir / "state.pt").string());
  INFO("python stderr: " << r.err);
  REQUIRE(r.code == 0);
  const loom::LoadedCheckpoint loaded = make_backend("torch_pickle")->load(dir.string());
  std::string ours;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const std::string name = line.substr(0, line.find('|'));
    REQUIRE(loaded.tensors.count(name));
    const at::Tensor& t = loaded.tensors.at(name);
    std::ostringstream one;
    one << name << "|[";
    for (int64_t i = 0; i < t.dim(); ++i) one << (i ? ", " : "") << t.size(i);
    one << "]|" << crc32(t.data_ptr(), t.nbytes()) << "\n";
    ours += one.str();
  }
  CHECK(loaded.tensors.size() == 14);
  CHECK(ours == r.out);
}

namespace {

// Hand-made data.pkl bytes, opcode by opcode (CPython's Lib/pickletools.py documents them).
struct Pickle {
  std::string bytes = "\x80\x02";  // PROTO 2
  Pickle& op(char c) { bytes += c; return *this; }
  Pickle& str(const std::string& s) {
    bytes += 'X';
    for (int i = 0; i < 4; ++i) bytes += char((s.size() >> (8 * i)) & 0xFF);
    bytes += s;
    return *this;
  }
  Pickle& integer(int64_t v) {
    const bool small = v >= INT32_MIN && v <= INT32_MAX;
    bytes += small ? "J" : "\x8a\x08";  // BININT, or LONG1 of 8 bytes
    for (int i = 0; i < (small ? 4 : 8); ++i) bytes += char((uint64_t(v) >> (8 * i)) & 0xFF);
    return *this;
  }
  Pickle& global(const std::string& module, const std::string& name) {
    bytes += 'c' + module + "\n" + name + "\n";
    return *this;
  }
  Pickle& ints(const std::vector<int64_t>& values) {
    op('(');
    for (int64_t v : values) integer(v);
    return op('t');
  }
  // _rebuild_tensor_v2(storage "0" of `numel` floats, offset, sizes, strides, False, OrderedDict())
  Pickle& tensor(int64_t numel, int64_t offset, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                 const std::string& storage_type = "FloatStorage") {
    global("torch._utils", "_rebuild_tensor_v2").op('(');
    op('(').str("storage").global("torch", storage_type).str("0").str("cpu").integer(numel).op('t').op('Q');
    integer(offset).ints(sizes).ints(strides).op('\x89');
    return global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
  }
  Pickle& dict_of(const std::string& name) { return op('}').op('(').str(name); }  // then a value, then end_dict
  Pickle& end_dict() { return op('u').op('.'); }
};

// state.pt as torch.save lays it out: data.pkl plus the storage record data/0.
void write_archive(const fs::path& dir, const std::string& pickle, const std::string& storage) {
  std::ofstream out(dir / "state.pt", std::ios::binary | std::ios::trunc);
  caffe2::serialize::PyTorchStreamWriter zip([&](const void* p, size_t n) {
    out.write(static_cast<const char*>(p), std::streamsize(n));
    return n;
  });
  zip.writeRecord("data.pkl", pickle.data(), pickle.size());
  zip.writeRecord("data/0", storage.data(), storage.size());
  zip.writeEndOfFile();
}

}  // namespace

TEST_CASE("torch_pickle: hostile archives are one-line refusals with exit code 2, never a crash or a hang") {
  const fs::path dir = fresh_dir("tp-hostile");
  const fs::path path = dir / "state.pt";
  const std::string floats64k(64 * 1024, '\0');  // 16384 floats
  const auto expect_refused = [&](const std::string& pickle, const std::string& storage, const std::string& phrase) {
    write_archive(dir, pickle, storage);
    const Caught c = load_error(dir);
    CHECK(c.code == static_cast<int>(loom::ExitCode::usage));
    CHECK_MESSAGE(contains(c.message, path.string()), c.message);
    CHECK_MESSAGE(contains(c.message, phrase), c.message);
    CHECK(c.message.find('\n') == std::string::npos);
  };

  SUBCASE("the control: a well-formed hand-made archive loads") {
    write_archive(dir, Pickle().dict_of("w").tensor(16384, 0, {256, 64}, {64, 1}).end_dict().bytes, floats64k);
    const loom::LoadedCheckpoint loaded = make_backend("torch_pickle")->load(dir.string());
    CHECK(loaded.tensors.at("w").sizes() == at::IntArrayRef({256, 64}));
  }
  SUBCASE("a view larger than its storage ([16384, 64] floats over 64 KiB)") {
    expect_refused(Pickle().dict_of("w").tensor(16384, 0, {16384, 64}, {64, 1}).end_dict().bytes, floats64k,
                   "reaches element");
  }
  SUBCASE("a storage that declares more elements than its record holds") {
    expect_refused(Pickle().dict_of("w").tensor(1 << 20, 0, {16}, {1}).end_dict().bytes, floats64k, "holds 65536 bytes");
  }
  SUBCASE("an offset past the end") {
    expect_refused(Pickle().dict_of("w").tensor(16384, 16384, {1}, {1}).end_dict().bytes, floats64k, "reaches element");
  }
  SUBCASE("a negative offset") {
    expect_refused(Pickle().dict_of("w").tensor(16384, -4, {4}, {1}).end_dict().bytes, floats64k, "negative storage offset");
  }
  SUBCASE("a negative stride") {
    expect_refused(Pickle().dict_of("w").tensor(16384, 100, {4}, {-1}).end_dict().bytes, floats64k, "negative size or stride");
  }
  SUBCASE("a shape of zero times a huge dimension") {
    expect_refused(Pickle().dict_of("w").tensor(16384, 0, {0, int64_t(1) << 40, int64_t(1) << 20}, {1, 1, 1}).end_dict().bytes,
                   floats64k, "impossible shape");
  }
  SUBCASE("strides whose reach overflows 64 bits") {
    const int64_t huge = int64_t(1) << 62;
    expect_refused(Pickle().dict_of("w").tensor(16384, 0, {2, 2}, {huge, huge}).end_dict().bytes, floats64k,
                   "beyond any storage");
  }
  SUBCASE("200,000 nested tuples (LibTorch's recursive unpickler overflowed its stack on this)") {
    Pickle p;
    p.dict_of("w").op(')');
    p.bytes += std::string(200000, '\x85');  // TUPLE1, again and again
    expect_refused(p.end_dict().bytes, floats64k, "nested more than 32 deep");
  }
  SUBCASE("a call outside the weights-only set (os.system)") {
    expect_refused(Pickle().global("os", "system").str("true").op('\x85').op('R').op('.').bytes, floats64k, "loads os.system");
  }
  SUBCASE("archives older Loom versions wrote (LibTorch's pickle_save, a typed dict) still load") {
    c10::Dict<std::string, at::Tensor> dict;
    dict.insert("w", at::arange(6, at::kFloat).reshape({2, 3}));
    const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(dict));
    write_bytes(path, std::string(bytes.begin(), bytes.end()));
    const loom::LoadedCheckpoint loaded = make_backend("torch_pickle")->load(dir.string());
    CHECK(loaded.tensors.at("w").equal(at::arange(6, at::kFloat).reshape({2, 3})));
  }
  SUBCASE("a bool tensor, which the checkpoint ABI does not carry") {
    expect_refused(Pickle().dict_of("w").tensor(16, 0, {16}, {1}, "BoolStorage").end_dict().bytes, floats64k, "BoolStorage");
  }
  SUBCASE("a storage key that is a path") {
    Pickle p;
    p.dict_of("w").global("torch._utils", "_rebuild_tensor_v2").op('(');
    p.op('(').str("storage").global("torch", "FloatStorage").str("../../etc/hostname").str("cpu").integer(4).op('t').op('Q');
    p.integer(0).ints({4}).ints({1}).op('\x89').global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
    expect_refused(p.end_dict().bytes, floats64k, "not a plain name");
  }
  SUBCASE("the same name twice") {
    Pickle p;
    p.dict_of("w").tensor(16384, 0, {4}, {1}).str("w").tensor(16384, 0, {4}, {1});
    expect_refused(p.end_dict().bytes, floats64k, "appears twice");
  }
  SUBCASE("a pickle that stops in the middle") {
    const std::string whole = Pickle().dict_of("w").tensor(16384, 0, {4}, {1}).end_dict().bytes;
    expect_refused(whole.substr(0, whole.size() / 2), floats64k, "ends in the middle");
  }
}

TEST_CASE("torch_pickle: the archive must be a regular file of the folder: a FIFO, a device or a symbolic link is refused at once") {
  const fs::path dir = fresh_dir("tp-special");
  make_backend("torch_pickle")->save(dir.string(), sample_tensors(), sample_metadata());
  const fs::path path = dir / "state.pt";
  fs::remove(path);
  SUBCASE("a FIFO (reading it would block forever)") {
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    const Caught c = load_error(dir);
    CHECK(c.code == static_cast<int>(loom::ExitCode::usage));
    CHECK_MESSAGE(contains(c.message, "a FIFO"), c.message);
  }
  SUBCASE("a symbolic link to /dev/zero") {
    fs::create_symlink("/dev/zero", path);
    const Caught c = load_error(dir);
    CHECK(c.code == static_cast<int>(loom::ExitCode::usage));
    CHECK_MESSAGE(contains(c.message, "symbolic link"), c.message);
  }
  SUBCASE("a symbolic link to a real archive outside the folder") {
    const fs::path elsewhere = fresh_dir("tp-special-elsewhere");
    make_backend("torch_pickle")->save(elsewhere.string(), sample_tensors(), sample_metadata());
    fs::create_symlink(elsewhere / "state.pt", path);
    const Caught c = load_error(dir);
    CHECK(c.code == static_cast<int>(loom::ExitCode::usage));
    CHECK_MESSAGE(contains(c.message, "symbolic link"), c.message);
  }
}
