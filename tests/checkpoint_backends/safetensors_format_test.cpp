// The safetensors backend against the published format, read and written here by a minimal
// independent implementation that follows the huggingface/safetensors README ("Format"):
// 8-byte little-endian header length N, N bytes of JSON header, then the byte buffer that the
// header's data_offsets tile exactly. Also: every corrupt or truncated file is one clear
// error, never a crash.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "backend_harness.hpp"

using namespace loom_test;

namespace {

// ---- an independent reader and writer ------------------------------------------------

struct StFile {
  uint64_t header_length = 0;
  std::string header_text;     // the N header bytes, padding included
  nlohmann::ordered_json header;
  std::string buffer;          // everything after the header
};

StFile read_safetensors(const fs::path& path) {
  const std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() >= 8);
  StFile f;
  for (int i = 0; i < 8; ++i) f.header_length |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  REQUIRE(8 + f.header_length <= bytes.size());
  f.header_text = bytes.substr(8, f.header_length);
  f.header = nlohmann::ordered_json::parse(f.header_text);
  f.buffer = bytes.substr(8 + f.header_length);
  return f;
}

// The format's dtype names, written out here rather than taken from the plugin.
std::string st_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "F32";
    case at::kDouble: return "F64";
    case at::kHalf: return "F16";
    case at::kBFloat16: return "BF16";
    case at::kLong: return "I64";
    case at::kInt: return "I32";
    case at::kByte: return "U8";
    default: FAIL("no safetensors name for " << c10::toString(t)); return "";
  }
}

// Writes a file the way a third-party writer might: any header text, padded or not.
void write_safetensors(const fs::path& path, const std::string& header, const std::string& buffer) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xFF);
  write_bytes(path, bytes + header + buffer);
}

// Loads dir with the real plugin; returns the Failure (code 0 if none was thrown).
Caught load_error(const fs::path& dir) {
  return catch_failure([&] { make_backend("safetensors")->load(dir.string()); });
}

// The file the tests corrupt: the sample checkpoint, saved by the plugin.
fs::path saved_sample(const std::string& name) {
  const fs::path dir = fresh_dir(name);
  make_backend("safetensors")->save(dir.string(), sample_tensors(), sample_metadata());
  return dir;
}

}  // namespace

TEST_CASE("safetensors: an independent reader finds every tensor, byte for byte, and the metadata") {
  const fs::path dir = saved_sample("st-format");
  const StFile f = read_safetensors(dir / "state.safetensors");

  SUBCASE("the header is JSON padded with spaces to a multiple of 8 bytes") {
    CHECK(f.header_length % 8 == 0);
    CHECK(f.header_text.front() == '{');
    const size_t last = f.header_text.find_last_not_of(' ');
    CHECK(f.header_text[last] == '}');
  }

  SUBCASE("__metadata__ maps strings to strings and keeps the JSON under \"loom\"") {
    REQUIRE(f.header.contains("__metadata__"));
    for (const auto& [k, v] : f.header["__metadata__"].items()) CHECK_MESSAGE(v.is_string(), k);
    CHECK(f.header["__metadata__"]["loom"].get<std::string>() == sample_metadata());
    CHECK(f.header["__metadata__"]["format"].get<std::string>() == "pt");
  }

  SUBCASE("every tensor has its dtype, shape and bytes") {
    const loom::NamedTensors expected = sample_tensors();
    CHECK(f.header.size() == expected.size() + 1);
    for (const auto& [name, tensor] : expected) {
      CAPTURE(name);
      REQUIRE(f.header.contains(name));
      const auto& info = f.header[name];
      CHECK(info["dtype"].get<std::string>() == st_dtype(tensor.scalar_type()));
      CHECK(info["shape"].get<std::vector<int64_t>>() == tensor.sizes().vec());
      const uint64_t begin = info["data_offsets"][0].get<uint64_t>();
      const uint64_t end = info["data_offsets"][1].get<uint64_t>();
      REQUIRE(begin <= end);
      REQUIRE(end <= f.buffer.size());
      CHECK(end - begin == tensor.nbytes());
      CHECK(f.buffer.compare(begin, end - begin, static_cast<const char*>(tensor.data_ptr()), tensor.nbytes()) == 0);
      // Natural alignment in the file, so a memory map hands out aligned tensors.
      CHECK((8 + f.header_length + begin) % tensor.element_size() == 0);
    }
  }

  SUBCASE("the offsets tile the byte buffer in header order, with no hole and nothing left over") {
    uint64_t at = 0;
    for (const auto& [name, info] : f.header.items()) {
      if (name == "__metadata__") continue;
      CAPTURE(name);
      CHECK(info["data_offsets"][0].get<uint64_t>() == at);
      at = info["data_offsets"][1].get<uint64_t>();
    }
    CHECK(at == f.buffer.size());
  }
}

TEST_CASE("safetensors: a file from another writer loads (any key order, no padding, no loom metadata)") {
  const fs::path dir = fresh_dir("st-foreign");
  const float b[2] = {1.5f, -2.0f};
  const int64_t a = -7;
  std::string buffer(reinterpret_cast<const char*>(b), sizeof b);
  buffer.append(reinterpret_cast<const char*>(&a), sizeof a);
  write_safetensors(dir / "state.safetensors",
                    R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("a":{"dtype":"I64","shape":[],"data_offsets":[8,16]},"__metadata__":{"format":"pt"}})",
                    buffer);
  const loom::LoadedCheckpoint loaded = make_backend("safetensors")->load(dir.string());
  REQUIRE(loaded.tensors.size() == 2);
  CHECK(loaded.tensors.at("b")[1].item<float>() == -2.0f);
  CHECK(loaded.tensors.at("a").dim() == 0);
  CHECK(loaded.tensors.at("a").item<int64_t>() == -7);
  CHECK(loaded.metadata_json.empty());  // no "loom" key: the host gets no metadata
}

TEST_CASE("safetensors: truncated, flipped and garbage files are clear errors") {
  const fs::path dir = saved_sample("st-corrupt");
  const fs::path path = dir / "state.safetensors";
  const std::string good = read_bytes(path);
  const auto expect_error = [&](const std::string& phrase) {
    const Caught c = load_error(dir);
    CHECK(c.code == static_cast<int>(loom::ExitCode::usage));
    CHECK_MESSAGE(contains(c.message, path.string()), c.message);
    CHECK_MESSAGE(contains(c.message, phrase), c.message);
  };

  SUBCASE("the last byte is missing") {
    write_bytes(path, good.substr(0, good.size() - 1));
    expect_error("truncated");
  }
  SUBCASE("the file is shorter than the length field") {
    write_bytes(path, good.substr(0, 5));
    expect_error("too short");
  }
  SUBCASE("the file is empty") {
    write_bytes(path, "");
    expect_error("too short");
  }
  SUBCASE("a flipped high byte in the header length") {
    std::string bad = good;
    bad[7] = char(bad[7] ^ 0x80);
    write_bytes(path, bad);
    expect_error("header length");
  }
  SUBCASE("a flipped low byte in the header length") {
    std::string bad = good;
    bad[0] = char(bad[0] ^ 0x01);
    write_bytes(path, bad);
    expect_error("not a valid safetensors file");
  }
  SUBCASE("garbage JSON") {
    write_safetensors(path, "{\"a\": [1, 2,, }  ", "");
    expect_error("not valid JSON");
  }
  SUBCASE("a header that is not an object") {
    write_safetensors(path, "[1, 2, 3]", "");
    expect_error("start with '{'");
  }
  SUBCASE("an empty header") {
    write_safetensors(path, "", "");
    expect_error("empty");
  }
  SUBCASE("extra bytes after the last tensor") {
    write_bytes(path, good + "x");
    expect_error("belong to no tensor");
  }
}

TEST_CASE("safetensors: headers that lie about the data are clear errors") {
  const fs::path dir = fresh_dir("st-lies");
  const fs::path path = dir / "state.safetensors";
  const std::string twelve(12, '\x01');
  struct Case {
    const char* header;
    std::string buffer;
    const char* phrase;
  };
  const Case cases[] = {
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(4, '\0'), "truncated"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"u":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       twelve, "overlaps"},
      {R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"u":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       twelve, "hole"},
      {R"({"t":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", std::string(4, '\0'), "F8_E4M3"},
      {R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'), "need 12"},
      {R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, '\0'), "non-negative"},
      {R"({"t":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", std::string(8, '\0'), "non-negative"},
      {R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})",
       std::string(8, '\0'), "overflows"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", std::string(8, '\0'), "data_offsets"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", std::string(8, '\0'), "data_offsets"},
      {R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", std::string(8, '\0'), "shape"},
      {R"({"t":{"shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'), "dtype"},
      {R"({"t":[1,2]})", "", "not a JSON object"},
      {R"({"__metadata__":{"loom":{"step":1}}})", "", "__metadata__"},
      {R"({"__metadata__":"x"})", "", "__metadata__"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.header);
    write_safetensors(path, c.header, c.buffer);
    const Caught e = load_error(dir);
    CHECK(e.code == static_cast<int>(loom::ExitCode::usage));
    CHECK_MESSAGE(contains(e.message, c.phrase), e.message);
    CHECK(contains(e.message, path.string()));
  }
}

TEST_CASE("safetensors: every truncation and every flipped header byte is an error or a clean load, never a crash") {
  const fs::path dir = saved_sample("st-fuzz");
  const fs::path path = dir / "state.safetensors";
  const std::string good = read_bytes(path);
  const StFile f = read_safetensors(path);

  // Any shorter file breaks the exact tiling of the buffer, so every one must fail.
  int failures = 0;
  for (size_t length = 0; length < good.size(); ++length) {
    write_bytes(path, good.substr(0, length));
    const Caught c = load_error(dir);
    failures += c.code == static_cast<int>(loom::ExitCode::usage);
  }
  CHECK(failures == int(good.size()));

  // A flipped header byte either still parses to a consistent header (e.g. a changed letter in
  // a name) or is refused; either way the process survives and errors are Failures.
  int refused = 0;
  const size_t header_end = 8 + size_t(f.header_length);
  for (size_t i = 0; i < header_end; ++i) {
    for (unsigned char mask : {0x01, 0x80, 0xFF}) {
      std::string bad = good;
      bad[i] = char(bad[i] ^ mask);
      write_bytes(path, bad);
      const Caught c = load_error(dir);
      CHECK((c.code == 0 || c.code == static_cast<int>(loom::ExitCode::usage)));
      refused += c.code != 0;
    }
  }
  CHECK(refused > int(header_end));  // most flips break the header
  MESSAGE("flipped header bytes refused: " << refused << " of " << 3 * header_end);

  // The format has no checksum over the data: a flipped data byte loads, changed. The manager's
  // index (file sizes and checksums) is what catches that.
  std::string bad = good;
  bad[good.size() - 1] = char(bad[good.size() - 1] ^ 0x01);
  write_bytes(path, bad);
  CHECK(load_error(dir).code == 0);
}
