// corpus.cpp: see corpus.hpp. Only std::mt19937_64's raw output is used (the standard fixes it;
// the distributions are implementation-defined), so every machine generates the same corpus.
#include "corpus.hpp"

#include <fstream>
#include <random>
#include <stdexcept>

namespace loom::test {

namespace {

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}
  size_t below(size_t n) { return static_cast<size_t>(rng_() % n); }
  template <size_t N>
  const char* pick(const char* const (&items)[N]) { return items[below(N)]; }

  std::string prose() {
    static const char* const words[] = {
        "the", "model", "learns", "from", "data", "it's", "don't", "we're", "they've", "I'm", "you'll", "she'd",
        "DON'T", "WE'LL", "It'S", "training", "gradient", "tokenizer", "Hugging", "Face", "loss", "fell", "quickly",
        "a", "an", "and", "or", "but", "not", "every", "naïve", "café", "résumé", "coöperate", "Zürich", "São",
        "Paulo", "über", "straße", "œuvre", "ﬁnance", "Ｆｕｌｌｗｉｄｔｈ", "e\xCC\x81tude", "A\xCC\x8Angstro\xCC\x88m",
        "ſtate", "\xE2\x84\xAA" "elvin", "İstanbul", "ΣΟΦΙΑ", "σοφία", "Москва", "привет", "שלום", "مرحبا", "नमस्ते",
        "हिन्दी", "안녕하세요", "สวัสดี", "Ελληνικά", "x86_64", "C++17", "e.g.", "i.e.", "U.S.A.", "Mr.", "O'Neil"};
    static const char* const punct[] = {".", ",", "!", "?", ";", ":", " -", " —", "...", "…", "\"", "'", ")", " (",
                                        " [", "]", "?!", " & ", " / ", "%", " #", " @", " $", " ~"};
    std::string out;
    const size_t n = 8 + below(60);
    for (size_t i = 0; i < n; ++i) {
      out += i ? " " : "";
      out += pick(words);
      if (below(5) == 0) out += pick(punct);
    }
    return out + ".\n";
  }

  std::string chinese() {
    static const char* const parts[] = {"我们", "模型", "训练", "数据", "的", "是", "在", "中文", "分词器", "测试",
                                        "人工智能", "深度学习", "，", "。", "！", "？", "「", "」", "《", "》", "、",
                                        "１２３", "二〇二六年", "𠮷", "龘", "㐀", "你好世界"};
    std::string out;
    for (size_t i = 0, n = 10 + below(80); i < n; ++i) out += pick(parts);
    return out + "\n";
  }

  std::string japanese() {
    static const char* const parts[] = {"これは", "テスト", "です", "。", "日本語", "の", "トークナイザー", "を",
                                        "使って", "、", "ｶﾀｶﾅ", "ひらがな", "漢字", "東京", "ー", "〜", "！", "「引用」",
                                        "ヴ", "が\xE3\x82\x99", "㍻", "①②③"};
    std::string out;
    for (size_t i = 0, n = 10 + below(60); i < n; ++i) out += pick(parts);
    return out + "\n";
  }

  std::string code() {
    static const char* const lines[] = {
        "int main(int argc, char** argv) {", "\treturn 0;", "}", "def forward(self, x):", "    return self.proj(x)",
        "for (size_t i = 0; i < n; ++i) {", "\t\tsum += a[i] * b[i];", "#include <vector>", "x = [1, 2, 3]  # list",
        "if x != None and y >= 0x1F:", "    print(f\"{name!r}: {value:.3f}\")", "SELECT * FROM runs WHERE loss < 0.5;",
        "const re = /\\s+(?!\\S)/gu;", "fn main() -> Result<(), Box<dyn Error>> {", "<div class=\"a\">&nbsp;</div>",
        "std::vector<std::string> v{\"a\", \"b\"};", "$ ./build/bin/host run configs/quickstart.toml"};
    std::string out;
    for (size_t i = 0, n = 3 + below(25); i < n; ++i) {
      const size_t indent = below(4) == 0 ? below(40) : 0;
      out += std::string(indent, below(3) == 0 ? '\t' : ' ');
      out += pick(lines);
      if (below(6) == 0) out += std::string(1 + below(30), ' ');  // trailing white space
      out += below(5) == 0 ? "\r\n" : below(4) == 0 ? "\n\n\n" : "\n";
    }
    return out;
  }

  std::string emoji() {
    static const char* const parts[] = {
        "😀", "🚀", "👍🏽", "👍🏿", "👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "🇯🇵", "🇺🇸🇫🇷", "1️⃣", "❤️", "✌︎",
        "🧑‍🤝‍🧑", "🤷‍♀️", "👁️‍🗨️", "🫠", "😶‍🌫️", " ", " ", "!!", "\xE2\x80\x8D", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"};
    std::string out;
    for (size_t i = 0, n = 5 + below(40); i < n; ++i) out += pick(parts);
    return out + "\n";
  }

  std::string numbers() {
    std::string out;
    for (size_t i = 0, n = 5 + below(30); i < n; ++i) {
      switch (below(9)) {
        case 0: out += std::to_string(rng_()); break;
        case 1: out += std::to_string(below(1000)) + "." + std::to_string(below(100000)); break;
        case 2: out += "1,234,567.89"; break;
        case 3: out += "2026-11-25T03:14:15Z"; break;
        case 4: out += "+1 (555) 010-" + std::to_string(1000 + below(9000)); break;
        case 5: out += "٣٤٥ ۱۲۳ १२३ ١٢"; break;
        case 6: out += "x² + y³ = ½ ¼ ⅞ Ⅻ"; break;
        case 7: out += "1e-7 3.14159 -0.0 0x7fffffff 0b1010"; break;
        default: out += std::string(1 + below(50), static_cast<char>('0' + below(10))); break;
      }
      out += below(3) == 0 ? "\n" : " ";
    }
    return out;
  }

  // Characters JavaScript, PCRE2 and Rust disagree on, plus U+FFFD itself.
  std::string white_space() {
    static const char* const parts[] = {"\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xC2\x85",
                                        "\xEF\xBB\xBF", "\xE2\x80\x8B", "\t", "\v", "\f", "\r", "\n", "  ", "\xE1\x9A\x80",
                                        "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE1\xA0\x8E", "word", "\xEF\xBF\xBD", "\x01\x1F"};
    std::string out;
    for (size_t i = 0, n = 10 + below(40); i < n; ++i) out += pick(parts);
    if (below(4) == 0) out += std::string(1, '\0');
    return out + "\n";
  }

  std::string specials() {
    static const char* const parts[] = {
        "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<bos>", "<eos>", "<start_of_turn>",
        "<end_of_turn>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<unk>", "<pad>",
        "<0x41>", "<|endofprompt|>", "<|im_sta", "<think>", "</think>", "<tool_call>", "<start_of_image>", "[INST]",
        "<|fim_prefix|>", "user", " assistant\n", "<mask>", "<<s>>", "<|im_start|>system\nYou are helpful.<|im_end|>\n"};
    std::string out;
    for (size_t i = 0, n = 4 + below(20); i < n; ++i) {
      out += pick(parts);
      if (below(2)) out += prose().substr(0, 20 + below(40));
    }
    return out;
  }

  std::string invalid_utf8() {
    static const char* const parts[] = {"\x80", "\xBF\xBF", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xED\xA0\x80",
                                        "\xED\xBF\xBF", "\xF0\x80\x80\xAF", "\xF4\x90\x80\x80", "\xF5", "\xFF", "\xFE",
                                        "\xE4\xB8", "\xF0\x9F\x98", "\xC3", "\xE2\x82", "ok", " text ", "\xEF\xBB\xBF"};
    std::string out;
    for (size_t i = 0, n = 5 + below(30); i < n; ++i) out += pick(parts);
    return out + "\n";
  }

  std::string section() {
    switch (below(12)) {
      case 0: case 1: case 2: return prose();
      case 3: return chinese();
      case 4: return japanese();
      case 5: case 6: return code();
      case 7: return emoji();
      case 8: return numbers();
      case 9: return white_space();
      case 10: return specials();
      default: return invalid_utf8();
    }
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace

std::vector<std::string> tokenizer_corpus(size_t min_bytes, uint64_t seed) {
  Generator gen(seed);
  std::vector<std::string> documents;
  size_t total = 0;
  while (total < min_bytes) {
    std::string document;
    const size_t target = 100 + gen.below(6000);
    while (document.size() < target) document += gen.section();
    total += document.size();
    documents.push_back(std::move(document));
  }
  return documents;
}

void write_corpus(const std::vector<std::string>& documents, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& document : documents) {
    const auto n = static_cast<uint32_t>(document.size());
    const char length[4] = {static_cast<char>(n & 0xFF), static_cast<char>((n >> 8) & 0xFF),
                            static_cast<char>((n >> 16) & 0xFF), static_cast<char>(n >> 24)};
    out.write(length, 4);
    out.write(document.data(), static_cast<std::streamsize>(document.size()));
  }
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace loom::test
