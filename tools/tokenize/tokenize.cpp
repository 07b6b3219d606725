// tokenize.cpp: loom-tokenize, the byte-level tokenizer. Turns text files or directories into
// a Loom token file for the `token_file` dataset, and decodes one back to text. Each byte is
// one token (vocab 256), exactly the tokens the `text` dataset reads from the same inputs:
// both walk directories with plugins/datasets/common/text_files.hpp.
//
// Exit codes match the host: 0 success, 1 I/O failure, 2 bad usage or bad input.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "data_error.hpp"
#include "little_endian.hpp"
#include "text_files.hpp"
#include "token_file_format.hpp"

namespace fs = std::filesystem;
using namespace loom::data;

namespace {

constexpr const char* kUsage =
    "loom-tokenize: byte-level tokenizer for Loom token files (each byte is one token, vocab 256).\n"
    "\n"
    "  loom-tokenize INPUT... -o OUT.tok [--dtype uint16|uint32] [--extensions .txt,.md]\n"
    "                [--exclude DIR]...\n"
    "      Tokenize files and directories (walked recursively in sorted order; hidden and build*\n"
    "      directories and each --exclude DIR skipped; only files with the given extensions are\n"
    "      taken from directories) into OUT.tok. The `token_file` dataset reads it; the `text` dataset reads the same\n"
    "      tokens from the same inputs directly.\n"
    "  loom-tokenize --decode FILE.tok [-o OUT]\n"
    "      Write the bytes of a byte-level token file back out (to stdout without -o).\n"
    "  loom-tokenize --help\n"
    "\n"
    "Exit codes: 0 success, 1 I/O failure, 2 bad usage or bad input.\n";

struct Usage {
  std::string message;
};

struct Args {
  std::vector<std::string> inputs, exclude;
  std::string output, decode, extensions = ".txt,.md";
  uint32_t token_bytes = 2;
  bool help = false;
};

Args parse_args(int argc, char** argv) {
  Args a;
  auto value = [&](int& i, const std::string& flag) -> std::string {
    if (i + 1 >= argc) throw Usage{flag + " needs a value"};
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") a.help = true;
    else if (arg == "-o" || arg == "--output") a.output = value(i, arg);
    else if (arg == "--decode") a.decode = value(i, arg);
    else if (arg == "--extensions") a.extensions = value(i, arg);
    else if (arg == "--exclude") a.exclude.push_back(value(i, arg));
    else if (arg == "--dtype") {
      const std::string d = value(i, arg);
      if (d == "uint16") a.token_bytes = 2;
      else if (d == "uint32") a.token_bytes = 4;
      else throw Usage{"--dtype must be uint16 or uint32, got \"" + d + "\""};
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw Usage{"unknown option " + arg};
    } else {
      a.inputs.push_back(arg);
    }
  }
  if (a.help) return a;
  if (!a.decode.empty()) {
    if (!a.inputs.empty()) throw Usage{"--decode takes one token file and no other inputs"};
  } else {
    if (a.inputs.empty()) throw Usage{"no INPUT given"};
    if (a.output.empty()) throw Usage{"no output given; add -o OUT.tok"};
  }
  return a;
}

// Owns a FILE*; the writer checks close for errors itself.
struct File {
  std::FILE* f = nullptr;
  ~File() {
    if (f) std::fclose(f);
  }
};

// Removes a temporary file unless the write it belongs to completed.
struct TempFile {
  std::string path;
  bool keep = false;
  ~TempFile() {
    if (!keep) std::remove(path.c_str());
  }
};

std::string errno_text() { return std::strerror(errno); }

int encode(const Args& a) {
  TextWalkOptions walk;
  walk.extensions = parse_extensions(a.extensions);
  walk.exclude_dirs.assign(a.exclude.begin(), a.exclude.end());
  const std::vector<fs::path> files = collect_text_files(a.inputs, walk);
  std::error_code ec;
  for (const auto& f : files)
    if (fs::equivalent(f, a.output, ec))
      throw bad_input(a.output + ": the output is also an input; write it elsewhere");

  // Write to a temporary name and rename at the end, so OUT is never half-written.
  const std::string tmp = a.output + ".tmp";
  TempFile cleanup{tmp};
  File out;
  out.f = std::fopen(tmp.c_str(), "wb");
  if (!out.f) throw io_error(tmp + ": cannot create: " + errno_text());
  TokenFileHeader header;
  header.token_bytes = a.token_bytes;
  const std::string placeholder = encode_token_file_header(header);  // the count is patched in at the end
  if (std::fwrite(placeholder.data(), 1, placeholder.size(), out.f) != placeholder.size())
    throw io_error(tmp + ": write failed: " + errno_text());
  std::string bytes, tokens;
  for (const auto& file : files) {
    bytes.clear();
    append_file_bytes(file, bytes);
    tokens.clear();
    for (unsigned char b : bytes) {
      if (a.token_bytes == 2) append_le<uint16_t>(tokens, b);
      else append_le<uint32_t>(tokens, b);
    }
    if (std::fwrite(tokens.data(), 1, tokens.size(), out.f) != tokens.size())
      throw io_error(tmp + ": write failed: " + errno_text());
    header.token_count += bytes.size();
  }
  if (header.token_count == 0) throw bad_input("the inputs hold no bytes; nothing to tokenize");
  const std::string head = encode_token_file_header(header);
  if (std::fseek(out.f, 0, SEEK_SET) != 0 || std::fwrite(head.data(), 1, head.size(), out.f) != head.size())
    throw io_error(tmp + ": write failed: " + errno_text());
  const int closed = std::fclose(out.f);
  out.f = nullptr;
  if (closed != 0) throw io_error(tmp + ": write failed: " + errno_text());
  fs::rename(tmp, a.output, ec);
  if (ec) throw io_error(a.output + ": cannot move " + tmp + " into place: " + ec.message());
  cleanup.keep = true;
  std::cout << "loom-tokenize: " << files.size() << " file(s), " << header.token_count << " bytes -> "
            << header.token_count << " " << token_dtype_name(a.token_bytes) << " tokens in " << a.output << "\n";
  return 0;
}

int decode(const Args& a) {
  File in;
  in.f = std::fopen(a.decode.c_str(), "rb");
  if (!in.f) {
    if (errno == ENOENT) throw bad_input(a.decode + ": no such file; check the path");
    throw io_error(a.decode + ": cannot open: " + errno_text());
  }
  std::error_code ec;
  const uint64_t size = fs::file_size(a.decode, ec);
  if (ec) throw io_error(a.decode + ": cannot read its size: " + ec.message());
  unsigned char head[kTokenFileHeaderBytes] = {};
  (void)std::fread(head, 1, sizeof head, in.f);
  const TokenFileHeader header = parse_token_file_header(head, size, a.decode);

  File owned_out;
  std::FILE* out = stdout;
  if (!a.output.empty()) {
    owned_out.f = std::fopen(a.output.c_str(), "wb");
    if (!owned_out.f) throw io_error(a.output + ": cannot create: " + errno_text());
    out = owned_out.f;
  }
  const size_t S = header.token_bytes;
  std::vector<unsigned char> buffer(S << 16);
  std::string text;
  uint64_t offset = 0;
  while (offset < header.token_count) {
    const size_t want = size_t(std::min<uint64_t>(header.token_count - offset, buffer.size() / S));
    if (std::fread(buffer.data(), S, want, in.f) != want) throw io_error(a.decode + ": read error: " + errno_text());
    text.resize(want);
    for (size_t i = 0; i < want; ++i) {
      const uint64_t id = S == 2 ? load_le<uint16_t>(&buffer[2 * i]) : load_le<uint32_t>(&buffer[4 * i]);
      if (id > 255)
        throw bad_input(a.decode + ": the token at element offset " + std::to_string(offset + i) + " has id " +
                        std::to_string(id) + ", not a byte; --decode only reverses byte-level files made by loom-tokenize");
      text[i] = char(id);
    }
    if (std::fwrite(text.data(), 1, text.size(), out) != text.size())
      throw io_error((a.output.empty() ? std::string("stdout") : a.output) + ": write failed: " + errno_text());
    offset += want;
  }
  if (std::fflush(out) != 0) throw io_error("write failed: " + errno_text());
  if (owned_out.f) {
    const int closed = std::fclose(owned_out.f);
    owned_out.f = nullptr;
    if (closed != 0) throw io_error(a.output + ": write failed: " + errno_text());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse_args(argc, argv);
    if (a.help) {
      std::cout << kUsage;
      return 0;
    }
    return a.decode.empty() ? encode(a) : decode(a);
  } catch (const Usage& u) {
    std::cerr << "loom-tokenize: error: " << u.message << "; see loom-tokenize --help\n";
    return 2;
  } catch (const DataError& e) {
    std::cerr << "loom-tokenize: error: " << e.what() << "\n";
    return e.kind() == DataError::Kind::bad_input ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "loom-tokenize: error: " << e.what() << "\n";
    return 1;
  }
}
