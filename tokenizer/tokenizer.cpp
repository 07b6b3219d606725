// tokenizer.cpp: load_tokenizer, which picks the reader for what a path holds.
#include "tokenizer.hpp"

#include <sys/stat.h>

#include "formats/files.hpp"
#include "formats/format_error.hpp"
#include "formats/hf_folder.hpp"
#include "hf_tokenizer.hpp"

namespace loom::tok {

namespace {

// tokenizer.json of a large vocabulary (Gemma 3: 33 MB) is the biggest file read here.
constexpr uint64_t kMaxTokenizerBytes = 256ull << 20;

bool is_directory(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Json read_json(const std::string& path) {
  const std::string text = formats::read_text_file(path, kMaxTokenizerBytes);
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    size_t line = 1;
    for (size_t i = 0; i < std::min<size_t>(e.byte, text.size()); ++i) line += text[i] == '\n';
    throw TokenizerError(path + " line " + std::to_string(line) + " is not valid JSON");
  }
}

// tokenizer_config.json beside the vocabulary, or null; a chat_template.jinja file beside it
// (newer transformers) wins over the config's chat_template.
Json read_config(const std::string& dir) {
  Json config;
  const std::string path = formats::join(dir, "tokenizer_config.json");
  if (formats::path_exists(path)) config = formats::read_json_object(path);
  const std::string jinja = formats::join(dir, "chat_template.jinja");
  if (formats::path_exists(jinja)) {
    if (!config.is_object()) config = Json::object();
    config["chat_template"] = formats::read_text_file(jinja, formats::kMaxJsonBytes);
  }
  return config;
}

std::string parent_dir(const std::string& file) {
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : file.substr(0, slash);
}

SentencePieceLoader& sentencepiece_loader() {
  static SentencePieceLoader loader = nullptr;
  return loader;
}

std::unique_ptr<Tokenizer> load_file(const std::string& file) {
  const Json config = read_config(parent_dir(file));
  if (ends_with(file, ".model")) {
    if (!sentencepiece_loader())
      throw TokenizerError(file + ": SentencePiece tokenizer.model files load in loom-tokenize only (Debian's "
                           "libsentencepiece cannot share a process with LibTorch); use a folder with tokenizer.json");
    return sentencepiece_loader()(formats::read_text_file(file, kMaxTokenizerBytes), config.is_null() ? "" : config.dump(), file);
  }
  return std::make_unique<HfTokenizer>(read_json(file), config, file);
}

}  // namespace

void set_sentencepiece_loader(SentencePieceLoader loader) { sentencepiece_loader() = loader; }

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (!is_directory(path)) {
    if (!formats::path_exists(path))
      throw formats::FormatError(formats::FormatError::Kind::not_found, "tokenizer '" + path + "' does not exist");
    return load_file(path);
  }
  for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
    const std::string file = formats::join(path, name);
    if (formats::path_exists(file)) return load_file(file);
  }
  throw formats::FormatError(formats::FormatError::Kind::not_found,
                             "folder '" + path + "' has neither tokenizer.json nor tokenizer.model");
}

}  // namespace loom::tok
