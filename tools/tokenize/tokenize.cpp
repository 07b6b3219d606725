// tokenize.cpp: loom-tokenize. Turns text files or directories into a Loom token file for the
// `token_file` dataset, and decodes one back to text. Without --tokenizer each byte is one token
// (vocab 256), exactly the tokens the `text` dataset reads from the same inputs: both walk
// directories with plugins/datasets/common/text_files.hpp. With --tokenizer a model's own
// tokenizer (tokenizer/) encodes each document on all cores (bpe_tokenize.hpp).
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

#include "bpe_tokenize.hpp"
#include "plugins/datasets/common/data_error.hpp"
#include "formats/format_error.hpp"
#include "plugins/datasets/common/little_endian.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"
#include "plugins/datasets/common/text_files.hpp"
#include "plugins/datasets/common/token_file_format.hpp"

namespace fs = std::filesystem;
using namespace loom::data;

namespace {

constexpr const char* kUsage =
    "loom-tokenize: text to Loom token files, byte-level or with a model's own tokenizer.\n"
    "\n"
    "  loom-tokenize INPUT... -o OUT.tok [--tokenizer DIR_OR_FILE] [--threads N] [--no-eos]\n"
    "                [--field NAME] [--dtype uint16|uint32] [--extensions .txt,.md] [--exclude DIR]...\n"
    "      Tokenize files and directories (walked recursively in sorted order; hidden and build*\n"
    "      directories and each --exclude DIR skipped; only files with the given extensions are\n"
    "      taken from directories) into OUT.tok, which the `token_file` dataset reads.\n"
    "      Without --tokenizer each byte is one token (vocab 256), the tokens the `text` dataset\n"
    "      reads from the same inputs directly.\n"
    "      --tokenizer: a Hugging Face tokenizer (a folder with tokenizer.json or tokenizer.model,\n"
    "      or the file). Each text file is one document, and each line of a .jsonl file is one\n"
    "      document (its --field string, default \"text\"); each document gets the tokenizer's\n"
    "      special tokens and, unless --no-eos, its EOS token after it. --threads defaults to the\n"
    "      CPUs this process may use; the output is the same for any thread count. --dtype\n"
    "      defaults to uint16 when the vocabulary fits, else uint32.\n"
    "  loom-tokenize --decode FILE.tok [--tokenizer DIR_OR_FILE] [-o OUT]\n"
    "      Write the text of a token file back out (to stdout without -o): the bytes of a\n"
    "      byte-level file, or the tokenizer's decoding of a file made with --tokenizer.\n"
    "  loom-tokenize --help\n"
    "\n"
    "Exit codes: 0 success, 1 I/O failure, 2 bad usage or bad input.\n";

struct Usage {
  std::string message;
};

struct Args {
  std::vector<std::string> inputs, exclude;
  std::string output, decode, extensions = ".txt,.md", tokenizer, field = "text";
  uint32_t token_bytes = 0;  // 0: uint16, or uint32 where the tokenizer's vocabulary needs it
  unsigned threads = 0;      // 0: every CPU this process may use
  bool help = false, no_eos = false;
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
    else if (arg == "--tokenizer") a.tokenizer = value(i, arg);
    else if (arg == "--field") a.field = value(i, arg);
    else if (arg == "--no-eos") a.no_eos = true;
    else if (arg == "--threads") {
      const std::string n = value(i, arg);
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || std::stoul(n) < 1 || std::stoul(n) > 1024)
        throw Usage{"--threads must be a whole number from 1 to 1024, got \"" + n + "\""};
      a.threads = static_cast<unsigned>(std::stoul(n));
    }
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

// The tokenizer named by --tokenizer; a bad one is bad input (exit 2), naming the file.
std::unique_ptr<loom::tok::Tokenizer> load_tokenizer_arg(const std::string& path) {
  try {
    return loom::tok::load_tokenizer(path);
  } catch (const loom::tok::TokenizerError& e) {
    throw bad_input(std::string("--tokenizer: ") + e.what());
  } catch (const loom::formats::FormatError& e) {
    throw bad_input(std::string("--tokenizer: ") + e.what());
  }
}

int encode(const Args& a) {
  TextWalkOptions walk;
  walk.extensions = parse_extensions(a.extensions);
  walk.exclude_dirs.assign(a.exclude.begin(), a.exclude.end());
  const std::vector<fs::path> files = collect_text_files(a.inputs, walk);
  std::error_code ec;
  for (const auto& f : files)
    if (fs::equivalent(f, a.output, ec))
      throw bad_input(a.output + ": the output is also an input; write it elsewhere");
  const auto tokenizer = a.tokenizer.empty() ? nullptr : load_tokenizer_arg(a.tokenizer);
  const bool wide_vocab = tokenizer && tokenizer->vocab_size() > 65536;
  const uint32_t token_bytes = a.token_bytes ? a.token_bytes : wide_vocab ? 4 : 2;
  if (token_bytes == 2 && wide_vocab)
    throw bad_input("--dtype uint16 cannot hold this tokenizer's ids (vocabulary of " +
                    std::to_string(tokenizer->vocab_size()) + "); use --dtype uint32");

  // Write to a temporary name and rename at the end, so OUT is never half-written.
  const std::string tmp = a.output + ".tmp";
  TempFile cleanup{tmp};
  File out;
  out.f = std::fopen(tmp.c_str(), "wb");
  if (!out.f) throw io_error(tmp + ": cannot create: " + errno_text());
  TokenFileHeader header;
  header.token_bytes = token_bytes;
  const std::string placeholder = encode_token_file_header(header);  // the count is patched in at the end
  if (std::fwrite(placeholder.data(), 1, placeholder.size(), out.f) != placeholder.size())
    throw io_error(tmp + ": write failed: " + errno_text());
  std::string tokens;
  auto write_ids = [&](const std::vector<uint32_t>& ids) {
    tokens.clear();
    for (const uint32_t id : ids) {
      if (token_bytes == 2) append_le<uint16_t>(tokens, static_cast<uint16_t>(id));
      else append_le<uint32_t>(tokens, id);
    }
    if (std::fwrite(tokens.data(), 1, tokens.size(), out.f) != tokens.size())
      throw io_error(tmp + ": write failed: " + errno_text());
    header.token_count += ids.size();
  };
  std::string summary;
  if (tokenizer) {
    BpeTokenizeOptions options;
    options.threads = a.threads ? a.threads : usable_cpus();
    options.append_eos = !a.no_eos;
    options.jsonl_field = a.field;
    const auto stats = bpe_tokenize(files, *tokenizer, options, [&](const std::vector<int32_t>& ids) {
      write_ids(std::vector<uint32_t>(ids.begin(), ids.end()));
    });
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.1f MB/s", stats.seconds > 0 ? double(stats.bytes) / 1e6 / stats.seconds : 0.0);
    summary = std::to_string(stats.documents) + " document(s), " + std::to_string(stats.bytes) + " bytes -> " +
              std::to_string(stats.tokens) + " " + token_dtype_name(token_bytes) + " tokens (" + tokenizer->info().source +
              ", " + std::to_string(options.threads) + " thread(s), " + rate + ")";
  } else {
    std::string bytes;
    for (const auto& file : files) {
      bytes.clear();
      append_file_bytes(file, bytes);
      write_ids(std::vector<uint32_t>(reinterpret_cast<const unsigned char*>(bytes.data()),
                                      reinterpret_cast<const unsigned char*>(bytes.data()) + bytes.size()));
    }
    summary = std::to_string(files.size()) + " file(s), " + std::to_string(header.token_count) + " bytes -> " +
              std::to_string(header.token_count) + " " + token_dtype_name(token_bytes) + " tokens";
  }
  if (header.token_count == 0) throw bad_input("the inputs hold no text; nothing to tokenize");
  const std::string head = encode_token_file_header(header);
  if (std::fseek(out.f, 0, SEEK_SET) != 0 || std::fwrite(head.data(), 1, head.size(), out.f) != head.size())
    throw io_error(tmp + ": write failed: " + errno_text());
  const int closed = std::fclose(out.f);
  out.f = nullptr;
  if (closed != 0) throw io_error(tmp + ": write failed: " + errno_text());
  fs::rename(tmp, a.output, ec);
  if (ec) throw io_error(a.output + ": cannot move " + tmp + " into place: " + ec.message());
  cleanup.keep = true;
  std::cout << "loom-tokenize: " << summary << " in " << a.output << "\n";
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
  const auto tokenizer = a.tokenizer.empty() ? nullptr : load_tokenizer_arg(a.tokenizer);
  const std::string out_name = a.output.empty() ? std::string("stdout") : a.output;
  auto put = [&](const std::string& text) {
    if (std::fwrite(text.data(), 1, text.size(), out) != text.size()) throw io_error(out_name + ": write failed: " + errno_text());
  };
  // With a tokenizer, ids are decoded a document (up to its EOS) at a time, so no character is
  // cut in two; a stream without EOS tokens is decoded in pieces of kDecodeIds.
  constexpr size_t kDecodeIds = 1u << 20;
  std::vector<int32_t> pending;
  std::vector<unsigned char> buffer(S << 16);
  std::string text;
  uint64_t offset = 0;
  while (offset < header.token_count) {
    const size_t want = size_t(std::min<uint64_t>(header.token_count - offset, buffer.size() / S));
    if (std::fread(buffer.data(), S, want, in.f) != want) throw io_error(a.decode + ": read error: " + errno_text());
    text.clear();
    for (size_t i = 0; i < want; ++i) {
      const uint64_t id = S == 2 ? load_le<uint16_t>(&buffer[2 * i]) : load_le<uint32_t>(&buffer[4 * i]);
      if (tokenizer) {
        pending.push_back(static_cast<int32_t>(id));
        if (pending.size() >= kDecodeIds || static_cast<int32_t>(id) == tokenizer->info().eos_id) {
          put(tokenizer->decode(pending));
          pending.clear();
        }
        continue;
      }
      if (id > 255)
        throw bad_input(a.decode + ": the token at element offset " + std::to_string(offset + i) + " has id " +
                        std::to_string(id) + ", not a byte; decode a file made with --tokenizer with that --tokenizer");
      text += char(id);
    }
    put(text);
    offset += want;
  }
  if (!pending.empty()) put(tokenizer->decode(pending));
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
  loom::tok::enable_sentencepiece();  // no LibTorch in this program: tokenizer.model folders work here
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
