// decoders.cpp: see decoders.hpp.
#include "decoders.hpp"

#include <cctype>
#include <cstdlib>

#include "byte_level.hpp"
#include "pattern.hpp"
#include "utf8.hpp"

namespace loom::tok {

namespace {

class Sequence : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (const auto& step : steps_) tokens = step->decode_chain(std::move(tokens));
    return tokens;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

// Bytes gathered token by token, emitted as one text (invalid UTF-8 as U+FFFD) when a token
// that is not bytes comes, and at the end.
struct ByteRun {
  std::vector<std::string>& out;
  std::string bytes;
  void flush() {
    if (!bytes.empty()) out.push_back(sanitize_utf8(bytes));
    bytes.clear();
  }
};

// Byte-level characters back to bytes, then to text; added tokens are not byte-level spelled
// and pass through whole, each cutting the run of bytes around it.
class ByteLevel : public Decoder {
 public:
  explicit ByteLevel(const std::unordered_set<std::string>& added) : added_(added) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    ByteRun run{out, {}};
    for (auto& token : tokens) {
      if (added_.count(token)) {
        run.flush();
        out.push_back(std::move(token));
        continue;
      }
      for (size_t pos = 0; pos < token.size();) {
        const int b = chars_to_byte(next_code_point(token, pos));
        run.bytes += static_cast<char>(b < 0 ? 0 : b);  // an unknown character decodes as byte 0, as in the reference
      }
    }
    run.flush();
    return out;
  }

 private:
  const std::unordered_set<std::string>& added_;
};

// Runs of <0xNN> tokens become the text their bytes spell.
class ByteFallback : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    ByteRun run{out, {}};
    for (auto& token : tokens) {
      if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' && std::isxdigit(static_cast<unsigned char>(token[3])) &&
          std::isxdigit(static_cast<unsigned char>(token[4]))) {
        run.bytes += static_cast<char>(std::strtol(token.substr(3, 2).c_str(), nullptr, 16));
        continue;
      }
      run.flush();
      out.push_back(std::move(token));
    }
    run.flush();
    return out;
  }
};

class Fuse : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string joined;
    for (const auto& token : tokens) joined += token;
    return {joined};
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class Strip : public Decoder {
 public:
  Strip(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (auto& token : tokens) {
      std::string_view view = token;
      for (size_t i = 0; i < start_ && view.substr(0, content_.size()) == content_; ++i) view.remove_prefix(content_.size());
      for (size_t i = 0; i < stop_ && view.size() >= content_.size() && view.substr(view.size() - content_.size()) == content_; ++i)
        view.remove_suffix(content_.size());
      token = std::string(view);
    }
    return tokens;
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class Replace : public Decoder {
 public:
  Replace(std::unique_ptr<JsRegex> pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (auto& token : tokens) token = replace_all(*pattern_, token, content_);
    return tokens;
  }

 private:
  std::unique_ptr<JsRegex> pattern_;
  std::string content_;
};

class Metaspace : public Decoder {
 public:
  Metaspace(const std::string& replacement, bool strip_first) : marker_(replacement, true, "decoder"), strip_first_(strip_first) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = replace_all(marker_, tokens[i], " ");
      if (strip_first_ && i == 0 && !tokens[i].empty() && tokens[i][0] == ' ') tokens[i].erase(0, 1);
    }
    return tokens;
  }

 private:
  JsRegex marker_;
  bool strip_first_;
};

// BERT's "##" continuation prefix: a token without it starts a new word.
class WordPiece : public Decoder {
 public:
  WordPiece(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i != 0) {
        if (tokens[i].compare(0, prefix_.size(), prefix_) == 0) tokens[i].erase(0, prefix_.size());
        else tokens[i].insert(0, " ");
      }
      if (cleanup_) tokens[i] = clean_up_tokenization(std::move(tokens[i]));
    }
    return tokens;
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

// The end-of-word suffix becomes a space, except after the last token.
class BpeSuffix : public Decoder {
 public:
  explicit BpeSuffix(const std::string& suffix) : suffix_(suffix, true, "decoder") {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = replace_all(suffix_, tokens[i], i + 1 == tokens.size() ? "" : " ");
    return tokens;
  }

 private:
  JsRegex suffix_;
};

void replace_every(std::string& text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
}

}  // namespace

std::string clean_up_tokenization(std::string text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) replace_every(text, from, to);
  return text;
}

std::unique_ptr<Decoder> make_decoder(const Json& config, const std::string& where,
                                      const std::unordered_set<std::string>& added_tokens) {
  if (config.is_null()) return nullptr;
  const std::string type = component_type(config, where);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> steps;
    const Json& list = required_array(config, "decoders", where);
    for (size_t i = 0; i < list.size(); ++i) {
      auto step = make_decoder(list[i], where + ".decoders[" + std::to_string(i) + "]", added_tokens);
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<Sequence>(std::move(steps));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(added_tokens);
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip") {
    const auto start = field_or<int64_t>(config, "start", 0, where), stop = field_or<int64_t>(config, "stop", 0, where);
    if (start < 0 || stop < 0) throw TokenizerError(where + ".start and .stop must not be negative");
    return std::make_unique<Strip>(required_field<std::string>(config, "content", where), static_cast<size_t>(start),
                                   static_cast<size_t>(stop));
  }
  if (type == "Replace")
    return std::make_unique<Replace>(make_pattern(config.value("pattern", Json()), where + ".pattern"),
                                     required_field<std::string>(config, "content", where));
  if (type == "Metaspace") {
    const bool strip = field_or(config, "add_prefix_space", true, where) &&
                       field_or<std::string>(config, "prepend_scheme", "always", where) != "never";
    return std::make_unique<Metaspace>(field_or<std::string>(config, "replacement", "\u2581", where), strip);
  }
  if (type == "WordPiece")
    return std::make_unique<WordPiece>(field_or<std::string>(config, "prefix", "##", where), field_or(config, "cleanup", true, where));
  if (type == "BPEDecoder") return std::make_unique<BpeSuffix>(field_or<std::string>(config, "suffix", "</w>", where));
  unsupported(where, type);
}

}  // namespace loom::tok
