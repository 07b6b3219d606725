// loom-sft-data: the instruction set of the fine-tuning example (README "Fine-tune a Hugging Face
// model"), and the exact-match score of a model's answers to its held-out questions.
//
//   loom-sft-data make --out DIR [--train N] [--heldout N] [--seed S]
//       DIR/train.jsonl     N conversations in OpenAI `messages` form, for the `sft` dataset
//       DIR/heldout.jsonl   questions never in train.jsonl, with their answers
//       DIR/heldout.txt     the same questions, one per line, for `host generate --prompts`
//   loom-sft-data score --heldout DIR/heldout.jsonl --generated FILE
//       FILE: `host generate --prompts ... --json` output, one object per line in question order;
//       prints the exact-match rate overall and per task.
//
// Three tasks with answers a program can check and a tiny model can learn: repeat a few words
// (copying), the number after N (carrying), and the sum of two numbers below 20. Each question
// names its task in a fixed phrase, so a score can be broken down by task. Deterministic for a
// seed: std::mt19937_64's raw output, never a distribution (implementation-defined).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

constexpr const char* kUsage =
    "usage: loom-sft-data make --out DIR [--train N] [--heldout N] [--seed S]\n"
    "       loom-sft-data score --heldout FILE --generated FILE\n"
    "make: an instruction set of three checkable tasks (repeat words, the number after N, a sum)\n"
    "  --out DIR     where train.jsonl, heldout.jsonl and heldout.txt go (created)\n"
    "  --train N     training conversations (default 6000)\n"
    "  --heldout N   held-out questions, none of them in train.jsonl (default 150)\n"
    "  --seed S      the data's seed (default 0)\n"
    "score: the exact-match rate of `host generate --prompts heldout.txt --json` output\n"
    "  --heldout FILE    heldout.jsonl from make\n"
    "  --generated FILE  the generate output, one JSON object with \"text\" per line\n"
    "exit codes: 0 done, 2 bad usage or input\n";

constexpr const char* kWords[] = {"red",  "blue", "green", "cat",  "dog",  "sun",  "moon", "tree", "fish", "bird",
                                  "book", "door", "hat",   "cup",  "star", "rain", "snow", "milk", "leaf", "rock"};

struct Task {
  std::string name, question, answer;
};

struct Rng {
  std::mt19937_64 engine;
  uint64_t below(uint64_t n) { return engine() % n; }
};

Task make_task(Rng& rng) {
  switch (rng.below(3)) {
    case 0: {
      std::string words;
      const uint64_t n = 2 + rng.below(3);
      for (uint64_t i = 0; i < n; ++i) words += std::string(i ? " " : "") + kWords[rng.below(std::size(kWords))];
      return {"repeat", "Repeat: " + words, words};
    }
    case 1: {
      const uint64_t n = rng.below(1000);
      return {"next", "What number comes after " + std::to_string(n) + "?", std::to_string(n + 1)};
    }
    default: {
      const uint64_t a = rng.below(20), b = rng.below(20);
      return {"sum", "What is " + std::to_string(a) + " plus " + std::to_string(b) + "?", std::to_string(a + b)};
    }
  }
}

json conversation(const Task& t) {
  return {{"messages", {{{"role", "user"}, {"content", t.question}}, {{"role", "assistant"}, {"content", t.answer}}}},
          {"task", t.name}};
}

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "loom-sft-data: " << message << "\n";
  std::exit(2);
}

std::ofstream open_out(const std::string& path) {
  std::ofstream out(path);
  if (!out) fail("cannot write " + path);
  return out;
}

int make(const std::string& dir, uint64_t train, uint64_t heldout, uint64_t seed) {
  if (std::system(("mkdir -p '" + dir + "'").c_str()) != 0) fail("cannot create " + dir);
  Rng rng{std::mt19937_64(seed)};
  // Held-out questions first, so the training set can avoid them.
  std::vector<Task> held;
  std::set<std::string> held_questions;
  for (uint64_t tries = 0; held.size() < heldout && tries < heldout * 100; ++tries) {
    Task t = make_task(rng);
    if (held_questions.insert(t.question).second) held.push_back(t);
  }
  if (held.size() < heldout) fail("cannot find " + std::to_string(heldout) + " distinct held-out questions");
  auto train_out = open_out(dir + "/train.jsonl"), held_out = open_out(dir + "/heldout.jsonl"),
       prompts = open_out(dir + "/heldout.txt");
  uint64_t written = 0;
  for (uint64_t tries = 0; written < train && tries < train * 100; ++tries) {
    const Task t = make_task(rng);
    if (held_questions.count(t.question)) continue;
    train_out << conversation(t).dump() << "\n";
    ++written;
  }
  if (written < train) fail("cannot find " + std::to_string(train) + " training questions outside the held-out set");
  for (const Task& t : held) {
    held_out << conversation(t).dump() << "\n";
    prompts << t.question << "\n";
  }
  std::cout << "wrote " << dir << "/train.jsonl (" << written << " conversations), heldout.jsonl and heldout.txt ("
            << held.size() << " questions)\n";
  return 0;
}

// A reply as the answer it gives: without a <think>...</think> block (Qwen3's template asks the
// model for an empty one) and surrounding white space.
std::string answer_of(std::string text) {
  const size_t think_end = text.find("</think>");
  if (think_end != std::string::npos) text = text.substr(think_end + std::strlen("</think>"));
  const char* space = " \t\r\n";
  const size_t first = text.find_first_not_of(space);
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

std::vector<json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read " + path);
  std::vector<json> out;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_object()) fail(path + " line " + std::to_string(n) + ": not a JSON object");
    out.push_back(std::move(j));
  }
  return out;
}

int score(const std::string& heldout_path, const std::string& generated_path) {
  const auto heldout = read_jsonl(heldout_path), generated = read_jsonl(generated_path);
  if (heldout.size() != generated.size())
    fail(generated_path + " has " + std::to_string(generated.size()) + " replies for " + std::to_string(heldout.size()) +
         " questions in " + heldout_path + "; generate with --prompts heldout.txt");
  std::map<std::string, std::pair<int, int>> by_task;  // task -> (right, asked)
  int right = 0;
  for (size_t i = 0; i < heldout.size(); ++i) {
    const auto& messages = heldout[i].value("messages", json::array());
    if (messages.size() != 2 || !generated[i].contains("text") || !generated[i]["text"].is_string())
      fail("line " + std::to_string(i + 1) + ": expected a question and answer in " + heldout_path + " and \"text\" in " +
           generated_path);
    const bool ok = answer_of(generated[i]["text"].get<std::string>()) == messages[1]["content"].get<std::string>();
    auto& [task_right, asked] = by_task[heldout[i].value("task", std::string("all"))];
    task_right += ok;
    ++asked;
    right += ok;
  }
  std::printf("exact match: %d/%zu (%.1f%%)", right, heldout.size(), heldout.empty() ? 0.0 : 100.0 * right / heldout.size());
  for (const auto& [task, counts] : by_task) std::printf("; %s %d/%d", task.c_str(), counts.first, counts.second);
  std::printf("\n");
  return 0;
}

uint64_t number(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || text[0] == '-') fail(flag + " takes a non-negative integer, got \"" + text + "\"");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  std::map<std::string, std::string> flags;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (args[i].rfind("--", 0) != 0 || i + 1 == args.size()) fail("expected --FLAG VALUE, got \"" + args[i] + "\"; see --help");
    flags[args[i]] = args[i + 1];
    ++i;
  }
  const auto take = [&](const std::string& flag, const std::string& fallback) {
    const auto it = flags.find(flag);
    std::string v = it == flags.end() ? fallback : it->second;
    if (it != flags.end()) flags.erase(it);
    return v;
  };
  int rc = 0;
  if (args[0] == "make") {
    const std::string out = take("--out", "");
    if (out.empty()) fail("make needs --out DIR");
    const uint64_t train = number(take("--train", "6000"), "--train"), heldout = number(take("--heldout", "150"), "--heldout"),
                   seed = number(take("--seed", "0"), "--seed");
    if (!flags.empty()) fail("make does not take " + flags.begin()->first + "; see --help");
    rc = make(out, train, heldout, seed);
  } else if (args[0] == "score") {
    const std::string heldout = take("--heldout", ""), generated = take("--generated", "");
    if (heldout.empty() || generated.empty()) fail("score needs --heldout FILE and --generated FILE");
    if (!flags.empty()) fail("score does not take " + flags.begin()->first + "; see --help");
    rc = score(heldout, generated);
  } else {
    fail("unknown command \"" + args[0] + "\"; see --help");
  }
  return rc;
}
