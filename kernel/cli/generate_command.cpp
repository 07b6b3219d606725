// `host generate MODEL [--prompt TEXT | --chat]`: text from a trained model, no Python. MODEL is
// a Hugging Face folder, a run folder or a checkpoint (cli/rebuilt_model.hpp); the tokenizer is
// the model folder's own or --tokenizer; stop tokens come from generation_config.json and the
// tokenizer's EOS. --chat renders the conversation with the tokenizer's chat template (chat/)
// and, without --prompt, reads one user message per line of standard input. Text streams out as
// it is decoded; --json prints the prompt and new ids, the text and the decoding's seconds as
// one JSON object instead.
// --prompts FILE answers each line on its own (the held-out questions of an evaluation).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/failure.hpp"
#include "chat/chat_template.hpp"
#include "cli/commands.hpp"
#include "cli/generation.hpp"
#include "cli/rebuilt_model.hpp"
#include "formats/files.hpp"
#include "formats/format_error.hpp"
#include "formats/hf_folder.hpp"
#include "tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;

namespace loom {
namespace {

double number_flag(const std::string& text, const char* flag) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') throw usage_failure(std::string("generate: ") + flag + " takes a number, got \"" + text + "\"");
  return v;
}

std::unique_ptr<tok::Tokenizer> open_tokenizer(const std::string& path) {
  try {
    return tok::load_tokenizer(path);
  } catch (const tok::TokenizerError& e) {
    throw usage_failure(std::string("generate: tokenizer: ") + e.what());
  } catch (const formats::FormatError& e) {
    throw usage_failure(std::string("generate: tokenizer: ") + e.what() + "; pass --tokenizer DIR (the model's tokenizer folder)");
  }
}

// EOS ids of generation_config.json (a number or a list) in the model folder, and the tokenizer's.
std::set<int64_t> stop_ids(const fs::path& folder, const tok::Tokenizer& tokenizer) {
  std::set<int64_t> out;
  if (tokenizer.info().eos_id) out.insert(*tokenizer.info().eos_id);
  const std::string file = (folder / "generation_config.json").string();
  if (!formats::path_exists(file)) return out;
  nlohmann::json config;
  try {
    config = formats::read_json_object(file);
  } catch (const formats::FormatError& e) {
    throw usage_failure(std::string("generate: ") + e.what() + "; fix the file or remove it (its eos_token_id are the stop ids)");
  }
  const auto eos = config.find("eos_token_id");
  if (eos != config.end() && eos->is_number_integer()) out.insert(eos->get<int64_t>());
  if (eos != config.end() && eos->is_array())
    for (const auto& id : *eos)
      if (id.is_number_integer()) out.insert(id.get<int64_t>());
  return out;
}

// The model's longest input: the seq_len it was built with where known, else its Hugging Face
// description's limit; hf_causal_lm builds a folder's model for at most kHfDefaultContext.
int64_t context_of(const RebuiltModel& rebuilt) {
  constexpr int64_t kHfDefaultContext = 2048;
  if (rebuilt.seq_len > 0) return rebuilt.seq_len;
  const std::string description = rebuilt.model->hugging_face();
  const auto json = nlohmann::json::parse(description, nullptr, false);
  const auto config = json.is_object() ? json.value("config", nlohmann::json::object()) : nlohmann::json::object();
  for (const char* key : {"max_position_embeddings", "n_positions"})
    if (config.contains(key) && config[key].is_number_integer()) return std::min(config[key].get<int64_t>(), kHfDefaultContext);
  return kHfDefaultContext;
}

// Prints decoded text as tokens arrive; holds back while the text ends in an unfinished character.
class Stream {
 public:
  explicit Stream(const tok::Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  void add(int64_t id) {
    ids_.push_back(static_cast<int32_t>(id));
    const std::string text = tokenizer_.decode(ids_, /*skip_special_tokens=*/true);
    if (text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0) return;
    if (text.compare(0, printed_.size(), printed_) == 0) std::cout << text.substr(printed_.size()) << std::flush;
    printed_ = text;
  }

 private:
  const tok::Tokenizer& tokenizer_;
  std::vector<int32_t> ids_;
  std::string printed_;
};

struct Session {
  ModelInstance& model;
  const tok::Tokenizer& tokenizer;
  SamplingOptions sampling;
  std::set<int64_t> stop;
  bool json = false;

  // Generates after `prompt_text` (special tokens of the tokenizer's template added when `raw`).
  std::string reply(const std::string& prompt_text, bool raw) {
    std::vector<int64_t> prompt;
    for (const int32_t id : tokenizer.encode(prompt_text, raw)) prompt.push_back(id);
    if (prompt.empty() && tokenizer.info().bos_id) prompt.push_back(*tokenizer.info().bos_id);
    if (prompt.empty()) throw usage_failure("generate: the prompt is empty and the tokenizer has no BOS token to start from");
    Stream stream(tokenizer);
    const auto start = std::chrono::steady_clock::now();
    const auto ids = generate_tokens(model, prompt, sampling, stop, [&](int64_t id) {
      if (!json) stream.add(id);
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::vector<int32_t> narrow(ids.begin(), ids.end());
    const std::string text = tokenizer.decode(narrow, /*skip_special_tokens=*/true);
    if (json) {
      std::cout << nlohmann::json{{"prompt_ids", prompt}, {"ids", ids}, {"text", text}, {"seconds", seconds}}.dump() << "\n";
    } else {
      std::cout << "\n" << std::flush;
      std::fprintf(stderr, "[%zu tokens in %.2f s, %.1f tokens/s]\n", ids.size(), seconds, double(ids.size()) / std::max(seconds, 1e-9));
    }
    return text;
  }
};

// --prompts FILE: one prompt a line, blank lines skipped.
std::vector<std::string> prompt_lines(const std::string& file) {
  constexpr uint64_t kMaxPromptsBytes = 256ull << 20;
  std::string text;
  try {
    text = formats::read_text_file(file, kMaxPromptsBytes);
  } catch (const formats::FormatError& e) {
    throw usage_failure(std::string("generate: --prompts: ") + e.what());
  }
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) out.push_back(std::move(line));
    start = end + 1;
  }
  if (out.empty()) throw usage_failure("generate: --prompts " + file + " holds no prompt; write one per line");
  return out;
}

}  // namespace

int command_generate(const CommandLine& line) {
  SamplingOptions sampling;
  sampling.temperature = number_flag(line.temperature, "--temperature");
  sampling.top_p = number_flag(line.top_p, "--top-p");
  sampling.top_k = line.top_k;
  sampling.seed = static_cast<uint64_t>(line.seed);
  sampling.max_new_tokens = line.max_new_tokens;
  sampling.use_cache = !line.no_cache;
  check_sampling(sampling);
  if (!line.prompt.empty() && !line.prompts.empty()) throw usage_failure("generate: give --prompt TEXT or --prompts FILE, not both");
  if (line.prompt.empty() && line.prompts.empty() && !line.chat)
    throw usage_failure("generate: give --prompt TEXT, --prompts FILE, or --chat to read messages from standard input");
  std::vector<std::string> prompts = line.prompts.empty() ? std::vector<std::string>() : prompt_lines(line.prompts);
  if (!line.prompt.empty()) prompts.push_back(line.prompt);

  const auto rebuilt = rebuild_model(line.args.at(0), "generate", /*allow_hf_folder=*/true);
  const fs::path folder = rebuilt->hugging_face_folder ? rebuilt->source : fs::path(line.args.at(0));
  if (line.tokenizer.empty() && !rebuilt->hugging_face_folder)
    throw usage_failure("generate: a run or checkpoint carries no tokenizer; pass --tokenizer DIR");
  const auto tokenizer = open_tokenizer(line.tokenizer.empty() ? folder.string() : line.tokenizer);
  std::set<int64_t> stop = stop_ids(folder, *tokenizer);  // first: a bad generation_config.json is one line
  sampling.context = context_of(*rebuilt);
  Session session{*rebuilt->model, *tokenizer, sampling, std::move(stop), line.json};

  if (!line.chat) {
    for (const std::string& prompt : prompts) session.reply(prompt, /*raw=*/true);
    return 0;
  }
  if (tokenizer->info().chat_template.empty())
    throw usage_failure("generate: --chat needs a chat template, and " + tokenizer->info().source + " has none");
  std::unique_ptr<chat::ChatTemplate> chat_template;
  try {
    chat_template = std::make_unique<chat::ChatTemplate>(tokenizer->info().chat_template);
  } catch (const chat::TemplateError& e) {
    throw usage_failure(std::string("generate: the tokenizer's chat template: ") + e.what());
  }
  const nlohmann::json start = line.system.empty() ? nlohmann::json::array()
                                                   : nlohmann::json::array({{{"role", "system"}, {"content", line.system}}});
  // One user turn of `messages`, answered and appended.
  auto turn = [&](nlohmann::json& messages, const std::string& user) {
    messages.push_back({{"role", "user"}, {"content", user}});
    std::string prompt;
    try {
      prompt = chat_template->render({{"messages", messages}, {"add_generation_prompt", true},
                                      {"bos_token", tokenizer->info().bos_token},
                                      {"eos_token", tokenizer->info().eos_token}});
    } catch (const chat::TemplateError& e) {
      throw usage_failure(std::string("generate: the tokenizer's chat template refused the conversation: ") + e.what());
    }
    messages.push_back({{"role", "assistant"}, {"content", session.reply(prompt, /*raw=*/false)}});
  };
  if (!prompts.empty()) {
    for (const std::string& prompt : prompts) {
      nlohmann::json messages = start;  // each prompt is a conversation of its own
      turn(messages, prompt);
    }
    return 0;
  }
  nlohmann::json messages = start;
  const bool interactive = ::isatty(STDIN_FILENO) == 1;
  std::string user;
  while ((interactive ? std::cerr << "> " << std::flush : std::cerr), std::getline(std::cin, user))
    if (!user.empty()) turn(messages, user);
  return 0;
}

}  // namespace loom
