// pre_tokenizers.cpp: see pre_tokenizers.hpp. Each type cuts one piece at a time; a Sequence
// feeds the pieces of one step to the next.
#include "pre_tokenizers.hpp"

#include "byte_level.hpp"
#include "pattern.hpp"

namespace loom::tok {

namespace {

class PieceWise : public PreTokenizer {
 public:
  std::vector<std::string> split(std::vector<std::string> pieces, size_t section) const override {
    std::vector<std::string> out;
    out.reserve(pieces.size());
    for (auto& piece : pieces) split_one(std::move(piece), section, out);
    return out;
  }

 protected:
  virtual void split_one(std::string piece, size_t section, std::vector<std::string>& out) const = 0;
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  std::vector<std::string> split(std::vector<std::string> pieces, size_t section) const override {
    for (const auto& step : steps_) pieces = step->split(std::move(pieces), section);
    return pieces;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// What happens to the text a Split pattern matches (the "delimiter"), as Hugging Face defines it.
enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

Behavior parse_behavior(const std::string& name, const std::string& where) {
  if (name == "Removed") return Behavior::removed;
  if (name == "Isolated") return Behavior::isolated;
  if (name == "MergedWithPrevious") return Behavior::merged_with_previous;
  if (name == "MergedWithNext") return Behavior::merged_with_next;
  if (name == "Contiguous") return Behavior::contiguous;
  throw TokenizerError(where + ".behavior \"" + name + "\" is not one of Removed, Isolated, "
                       "MergedWithPrevious, MergedWithNext, Contiguous");
}

// Cuts `text` into (span, is_delimiter) runs and assembles them by `behavior`.
void split_by_matches(const JsRegex& pattern, bool invert, Behavior behavior, const std::string& text,
                      std::vector<std::string>& out) {
  struct Span {
    size_t begin, end;
    bool delimiter;
  };
  std::vector<Span> spans;
  size_t last = 0;
  pattern.for_each_match(text, [&](size_t begin, size_t end) {
    if (begin > last) spans.push_back({last, begin, invert});
    if (end > begin) spans.push_back({begin, end, !invert});
    last = end;
  });
  if (last < text.size()) spans.push_back({last, text.size(), invert});

  std::string pending;  // MergedWithNext: delimiters waiting for the piece after them
  bool previous_delimiter = false;
  for (const Span& span : spans) {
    std::string part = text.substr(span.begin, span.end - span.begin);
    if (!span.delimiter) {
      out.push_back(pending + part);
      pending.clear();
      previous_delimiter = false;
      continue;
    }
    switch (behavior) {
      case Behavior::removed: break;
      case Behavior::isolated: out.push_back(std::move(part)); break;
      case Behavior::contiguous:
        if (previous_delimiter && !out.empty()) out.back() += part;
        else out.push_back(std::move(part));
        break;
      case Behavior::merged_with_previous:
        if (!out.empty() && !previous_delimiter) out.back() += part;
        else out.push_back(std::move(part));
        break;
      case Behavior::merged_with_next: pending += part; break;
    }
    previous_delimiter = true;
  }
  if (!pending.empty()) out.push_back(std::move(pending));
}

class Split : public PieceWise {
 public:
  Split(std::unique_ptr<JsRegex> pattern, bool invert, Behavior behavior)
      : pattern_(std::move(pattern)), invert_(invert), behavior_(behavior) {}

 protected:
  void split_one(std::string piece, size_t, std::vector<std::string>& out) const override {
    split_by_matches(*pattern_, invert_, behavior_, piece, out);
  }

 private:
  std::unique_ptr<JsRegex> pattern_;
  bool invert_;
  Behavior behavior_;
};

// Pieces that are exactly the matches of a pattern (Whitespace, WhitespaceSplit, Digits).
class Matches : public PieceWise {
 public:
  explicit Matches(const std::string& pattern, const std::string& where)
      : pattern_(std::make_unique<JsRegex>(pattern, false, where)) {}

 protected:
  void split_one(std::string piece, size_t, std::vector<std::string>& out) const override {
    pattern_->for_each_match(piece, [&](size_t begin, size_t end) {
      if (end > begin) out.push_back(piece.substr(begin, end - begin));
    });
  }

 private:
  std::unique_ptr<JsRegex> pattern_;
};

// GPT-2's own split (used when ByteLevel has use_regex), in JavaScript's reading.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

class ByteLevel : public PieceWise {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, const std::string& where)
      : add_prefix_space_(add_prefix_space),
        words_(use_regex ? std::make_unique<JsRegex>(kGpt2Pattern, false, where) : nullptr) {}

 protected:
  void split_one(std::string piece, size_t, std::vector<std::string>& out) const override {
    if (add_prefix_space_ && (piece.empty() || piece[0] != ' ')) piece.insert(0, " ");
    if (!words_) {
      out.push_back(bytes_to_chars(piece));
      return;
    }
    words_->for_each_match(piece, [&](size_t begin, size_t end) {
      out.push_back(bytes_to_chars(std::string_view(piece).substr(begin, end - begin)));
    });
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<JsRegex> words_;
};

// SentencePiece's word boundary marker: spaces become `replacement`, one is put in front (by
// prepend_scheme), and with `split` each piece starts at a marker.
class Metaspace : public PieceWise {
 public:
  Metaspace(std::string replacement, std::string scheme, bool split, const std::string& where)
      : replacement_(std::move(replacement)), scheme_(std::move(scheme)), split_(split),
        marker_(std::make_unique<JsRegex>(replacement_, true, where)) {}

 protected:
  void split_one(std::string piece, size_t section, std::vector<std::string>& out) const override {
    std::string text = replace_all(*space_, piece, replacement_);
    const bool prepend = scheme_ == "always" || (scheme_ == "first" && section == 0);
    if (prepend && text.compare(0, replacement_.size(), replacement_) != 0) text.insert(0, replacement_);
    if (split_) split_by_matches(*marker_, false, Behavior::merged_with_next, text, out);
    else out.push_back(std::move(text));
  }

 private:
  std::string replacement_, scheme_;
  bool split_;
  std::unique_ptr<JsRegex> marker_;
  std::unique_ptr<JsRegex> space_ = std::make_unique<JsRegex>(" ", true, "Metaspace");
};

std::string metaspace_scheme(const Json& config, const std::string& where) {
  // Older files say add_prefix_space instead of prepend_scheme.
  if (!field_or(config, "add_prefix_space", true, where)) return "never";
  const std::string scheme = field_or<std::string>(config, "prepend_scheme", "always", where);
  if (scheme != "always" && scheme != "first" && scheme != "never")
    throw TokenizerError(where + ".prepend_scheme \"" + scheme + "\" is not one of always, first, never");
  return scheme;
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& config, const std::string& where) {
  if (config.is_null()) return nullptr;
  const std::string type = component_type(config, where);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    const Json& list = required_array(config, "pretokenizers", where);
    for (size_t i = 0; i < list.size(); ++i) {
      auto step = make_pre_tokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]");
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<Sequence>(std::move(steps));
  }
  if (type == "Split")
    return std::make_unique<Split>(make_pattern(config.value("pattern", Json()), where + ".pattern"),
                                   field_or(config, "invert", false, where),
                                   parse_behavior(required_field<std::string>(config, "behavior", where), where));
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(field_or(config, "add_prefix_space", false, where),
                                       field_or(config, "use_regex", true, where), where);
  if (type == "Metaspace")
    return std::make_unique<Metaspace>(field_or<std::string>(config, "replacement", "\u2581", where),
                                       metaspace_scheme(config, where), field_or(config, "split", true, where),
                                       where);
  if (type == "Digits")
    return std::make_unique<Matches>(field_or(config, "individual_digits", false, where) ? "[^0-9]+|[0-9]"
                                                                                         : "[^0-9]+|[0-9]+",
                                     where);
  if (type == "Whitespace") return std::make_unique<Matches>("\\w+|[^\\w\\s]+", where);
  if (type == "WhitespaceSplit") return std::make_unique<Matches>("\\S+", where);
  unsupported(where, type);
}

}  // namespace loom::tok
