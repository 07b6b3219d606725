// normalizers.cpp: see normalizers.hpp.
#include "normalizers.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "pattern.hpp"
#include "utf8.hpp"

namespace loom::tok {

std::string replace_all(const JsRegex& pattern, std::string_view text, const std::string& content) {
  std::string out;
  size_t copied = 0;
  pattern.for_each_match(text, [&](size_t begin, size_t end) {
    out.append(text.substr(copied, begin - copied));
    out += content;
    copied = end;
  });
  out.append(text.substr(copied));
  return out;
}

namespace {

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  std::string normalize(std::string text) const override {
    for (const auto& step : steps_) text = step->normalize(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(int options) : options_(options) {}
  std::string normalize(std::string text) const override {
    utf8proc_uint8_t* out = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                static_cast<utf8proc_ssize_t>(text.size()), &out,
                                static_cast<utf8proc_option_t>(options_));
    if (n < 0) return text;  // only on invalid UTF-8, which never gets here
    std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(n));
    std::free(out);
    return result;
  }

 private:
  int options_;
};

class Replace : public Normalizer {
 public:
  Replace(std::unique_ptr<JsRegex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string text) const override { return replace_all(*pattern_, text, content_); }

 private:
  std::unique_ptr<JsRegex> pattern_;
  std::string content_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string text) const override { return prefix_ + text; }

 private:
  std::string prefix_;
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string text) const override {
    std::string_view view = text;
    if (left_) view = trim_white_space_start(view);
    if (right_) view = trim_white_space_end(view);
    return std::string(view);
  }

 private:
  bool left_, right_;
};

// Lower case code point by code point (utf8proc's simple case mapping; JavaScript's
// toLowerCase also applies the context rules for final sigma, which this does not).
class Lowercase : public Normalizer {
 public:
  std::string normalize(std::string text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) append_utf8(out, utf8proc_tolower(next_code_point(text, pos)));
    return out;
  }
};

// Drops combining marks (Unicode category M), as transformers.js does.
class StripAccents : public Normalizer {
 public:
  std::string normalize(std::string text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      const char32_t cp = next_code_point(text, pos);
      const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
      if (category != UTF8PROC_CATEGORY_MN && category != UTF8PROC_CATEGORY_MC &&
          category != UTF8PROC_CATEGORY_ME)
        append_utf8(out, cp);
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& config, const std::string& where) {
  if (config.is_null()) return nullptr;
  const std::string type = component_type(config, where);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    const Json& list = required_array(config, "normalizers", where);
    for (size_t i = 0; i < list.size(); ++i) {
      auto step = make_normalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]");
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<Sequence>(std::move(steps));
  }
  if (type == "NFC") return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (type == "NFD") return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  if (type == "Replace")
    return std::make_unique<Replace>(make_pattern(config.value("pattern", Json()), where + ".pattern"),
                                     required_field<std::string>(config, "content", where));
  if (type == "Prepend") return std::make_unique<Prepend>(required_field<std::string>(config, "prepend", where));
  if (type == "Strip")
    return std::make_unique<Strip>(field_or(config, "strip_left", false, where),
                                   field_or(config, "strip_right", false, where));
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  unsupported(where, type);
}

}  // namespace loom::tok
