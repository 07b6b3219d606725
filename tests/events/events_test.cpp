// Hook events fire in the documented order and count over a run with gradient accumulation,
// evaluation and checkpoints; the control block's skip, stop, save-now and eval requests work.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "logged_losses.hpp"
#include "run_host.hpp"

namespace fs = std::filesystem;
using loom_test::run_host;

namespace {

const std::string kRecorderDir = std::string(LOOM_TEST_PLUGIN_DIR) + "/recorder";

// Writes a manifest with the recorder hook; `recorder` holds its extra options.
std::string manifest(const fs::path& dir, int steps, const std::string& recorder, const std::string& extra = "") {
  const fs::path path = dir / "m.toml";
  std::ofstream(path) << "[run]\nname = \"r\"\ndir = \"" << dir.string() << "\"\nsteps = " << steps
                      << "\nlog_every = 3\ngrad_accum = 2\nthreads = 1\npeak_flops = 1e9\n"
                         "[plugins]\npaths = [\"" << kRecorderDir << "\"]\n"
                         "[model]\nuse = \"mlp_lm\"\nn_embd = 8\ncontext = 1\nhidden = 16\n"
                         "[data]\nuse = \"synthetic\"\nbatch_size = 2\nseq_len = 8\n"
                         "[eval_data]\nuse = \"synthetic\"\nbatch_size = 2\nseq_len = 8\nmax_batches = 2\n"
                         "[optimizer]\nuse = \"adamw\"\n"
                         "[[trackers]]\nuse = \"jsonl\"\n"
                         "[[hooks]]\nuse = \"recorder\"\n"
                      << recorder << "\n" << extra;
  return path.string();
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> lines;
  std::istringstream in(loom_test::read_file(file));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> recorded(const fs::path& dir) { return lines_of(dir / "r" / "events.txt"); }

}  // namespace

TEST_CASE("events fire in the documented order and count") {
  const fs::path dir = loom_test::tmp_dir("events-order");
  const auto r = run_host("run " + manifest(dir, 6, "eval_every = 2", "[checkpoint]\nevery = 3\nasync = false\n"));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  std::vector<std::string> expected = {"train_begin 0"};
  for (int s = 1; s <= 6; ++s) {
    for (const char* e : {"step_begin", "after_backward", "before_optimizer_step"})
      expected.push_back(std::string(e) + " " + std::to_string(s - 1));
    expected.push_back("step_end " + std::to_string(s));
    if (s % 2 == 0) expected.push_back("eval_end " + std::to_string(s));  // after step_end
    if (s % 3 == 0) expected.push_back("log " + std::to_string(s));       // then trackers and log
    if (s % 3 == 0) expected.push_back("save " + std::to_string(s));      // then the checkpoint
  }
  expected.push_back("train_end 6");
  CHECK(recorded(dir) == expected);

  // Resuming fires load before train_begin, at the restored step.
  const auto resumed = run_host("run " + manifest(dir, 7, "eval_every = 2", "[checkpoint]\nevery = 3\n"));
  REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  const auto lines = recorded(dir);
  REQUIRE(lines.size() > expected.size() + 2);
  CHECK(lines[expected.size()] == "load 6");
  CHECK(lines[expected.size() + 1] == "train_begin 6");
  CHECK(lines.back() == "train_end 7");
}

TEST_CASE("control: skip drops one update, save-now writes a checkpoint, stop ends gracefully") {
  const fs::path dir = loom_test::tmp_dir("events-control");
  const auto r = run_host("run " + manifest(dir, 50, "skip_at = 2\nsave_at = 2\nstop_at = 4",
                                            "[checkpoint]\nevery = 0\nasync = false\n"));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(fs::exists(dir / "r" / "checkpoints" / "step-2"));  // save-now
  CHECK(fs::exists(dir / "r" / "checkpoints" / "step-4"));  // the graceful stop saves at the end
  CHECK_FALSE(fs::exists(dir / "r" / "checkpoints" / "step-5"));
  const auto lines = recorded(dir);
  CHECK(lines.back() == "train_end 4");
  std::istringstream metrics(loom_test::read_file(dir / "r" / "metrics.jsonl"));
  std::string last;
  for (std::string line; std::getline(metrics, line);) last = line;
  const auto json = nlohmann::json::parse(last);
  CHECK(json.at("step") == 4);
  CHECK(json.at("skipped_steps") == 1);
}

TEST_CASE("evaluation runs the same batches each time and reports eval_loss to trackers") {
  const fs::path dir = loom_test::tmp_dir("events-eval");
  const auto r = run_host("run " + manifest(dir, 4, "eval_every = 2") + " --set optimizer.lr=0");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  std::vector<double> eval_losses;
  std::istringstream metrics(loom_test::read_file(dir / "r" / "metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);) {
    const auto json = nlohmann::json::parse(line);
    if (json.contains("eval_loss")) eval_losses.push_back(json.at("eval_loss"));
  }
  REQUIRE(eval_losses.size() == 2);
  // With lr = 0 the model does not change, so the same batches give the same loss.
  CHECK(eval_losses[0] == eval_losses[1]);
  CHECK(eval_losses[0] > 4.0);  // an untrained byte model: about ln(256)
}

TEST_CASE("rollback: back to the newest checkpoint, trackers drop the undone steps, the run completes") {
  const fs::path dir = loom_test::tmp_dir("events-rollback");
  const auto r = run_host("run " + manifest(dir, 10, "rollback_at = 7", "[checkpoint]\nevery = 5\nasync = false\n") +
                          " --set run.log_every=1");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.err.find("rolled back from step 7 to 5") != std::string::npos);
  const auto lines = recorded(dir);
  const auto load = std::find(lines.begin(), lines.end(), "load 5");
  REQUIRE(load != lines.end());
  CHECK(*(load - 1) == "step_end 7");      // the rollback follows the step that asked for it
  CHECK(*(load + 1) == "step_begin 5");    // and training goes on from the checkpoint
  CHECK(lines.back() == "train_end 10");
  std::vector<int64_t> steps;
  std::istringstream metrics(loom_test::read_file(dir / "r" / "metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);) steps.push_back(nlohmann::json::parse(line).at("step"));
  CHECK(steps == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});  // 6 and 7 logged once, after the rollback
}

namespace {

// A run over the `text` dataset with report_epochs: a 100-byte corpus, seq_len 8, 2 rows per
// micro-batch, 2 micro-batches per step. Returns the manifest's path.
std::string epoch_manifest(const fs::path& dir, int steps, const std::string& name) {
  std::string corpus;
  for (int i = 0; i < 100; ++i) corpus.push_back(static_cast<char>('a' + (i * 7) % 26));
  std::ofstream(dir / "corpus.txt") << corpus;
  const fs::path path = dir / "epochs.toml";
  std::ofstream(path) << "[run]\nname = \"" << name << "\"\ndir = \"" << dir.string() << "\"\nsteps = " << steps
                      << "\nlog_every = 1\ngrad_accum = 2\nthreads = 1\npeak_flops = 1e9\n"
                         "[plugins]\npaths = [\"" << kRecorderDir << "\"]\n"
                         "[model]\nuse = \"mlp_lm\"\nn_embd = 8\ncontext = 1\nhidden = 16\n"
                         "[data]\nuse = \"text\"\npath = \"" << (dir / "corpus.txt").string()
                      << "\"\nbatch_size = 2\nseq_len = 8\nreport_epochs = true\n"
                         "[optimizer]\nuse = \"adamw\"\n"
                         "[[trackers]]\nuse = \"jsonl\"\n"
                         "[[hooks]]\nuse = \"recorder\"\nepochs = true\n"
                         "[checkpoint]\nevery_epoch = true\nkeep = 20\nasync = false\n";
  return path.string();
}

// "M batches of 2 per epoch", from the text dataset's start-up line.
int64_t batches_per_epoch(const std::string& log) {
  const size_t at = log.find(" batches of 2 per epoch");
  REQUIRE(at != std::string::npos);
  return std::stoll(log.substr(log.rfind(' ', at - 1) + 1));
}

std::vector<std::string> lines_starting(const std::vector<std::string>& lines, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& l : lines)
    if (l.rfind(prefix, 0) == 0) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("a finite dataset's epochs: epoch_end and epoch_begin in the step that crosses, every_epoch saves") {
  const fs::path dir = loom_test::tmp_dir("events-epochs");
  const auto r = run_host("run " + epoch_manifest(dir, 8, "r"));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const int64_t M = batches_per_epoch(r.err);
  REQUIRE(M >= 2);
  REQUIRE(M < 8);  // several epochs in 16 micro-batches
  const auto lines = recorded(dir);
  std::vector<std::string> ends, begins;
  // Epoch k ends after its M-th batch; the host learns it when it draws the next one, batch
  // k*M + 1 (1-based) of the run, which belongs to step ceil((k*M + 1) / 2).
  for (int64_t k = 1; k * M < 16; ++k) {
    const int64_t step = (k * M + 1 + 1) / 2;
    ends.push_back("epoch_end " + std::to_string(step - 1) + " " + std::to_string(k - 1));
    begins.push_back("epoch_begin " + std::to_string(step - 1) + " " + std::to_string(k));
    CHECK_MESSAGE(fs::exists(dir / "r" / "checkpoints" / ("step-" + std::to_string(step))), step);
  }
  CHECK(lines_starting(lines, "epoch_end") == ends);
  CHECK(lines_starting(lines, "epoch_begin") == begins);
  for (size_t i = 0; i + 1 < lines.size(); ++i)  // epoch_begin follows its epoch_end at once
    if (lines[i].rfind("epoch_end", 0) == 0) CHECK(lines[i + 1].rfind("epoch_begin", 0) == 0);
  CHECK(lines.back() == "train_end 8 " + std::to_string(ends.size()));
}

TEST_CASE("runs by epochs resume exactly, at an epoch boundary and in the middle of one") {
  const fs::path dir = loom_test::tmp_dir("events-epochs-resume");
  const auto whole = run_host("run " + epoch_manifest(dir, 8, "whole"));
  REQUIRE_MESSAGE(whole.code == 0, whole.err);
  const int64_t M = batches_per_epoch(whole.err);
  const int64_t boundary = (M + 2) / 2;  // the step in which the first epoch ends
  for (const int64_t first : {boundary, boundary + 1}) {
    CAPTURE(first);
    const std::string name = "split-" + std::to_string(first);
    REQUIRE(run_host("run " + epoch_manifest(dir, static_cast<int>(first), name) + " --set checkpoint.every=1").code ==
            0);
    const auto resumed = run_host("run " + epoch_manifest(dir, 8, name) + " --set checkpoint.every=1");
    REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
    CHECK(loom_test::logged_losses(dir / name) == loom_test::logged_losses(dir / "whole"));
    // The same epoch ends at the same steps with the same counts, none repeated or lost.
    CHECK(lines_starting(lines_of(dir / name / "events.txt"), "epoch_") ==
          lines_starting(lines_of(dir / "whole" / "events.txt"), "epoch_"));
  }
}

TEST_CASE("run.epochs: the steps come from the dataset's epoch length, and the last epoch's end fires too") {
  const fs::path dir = loom_test::tmp_dir("events-run-epochs");
  // A run by epochs names no steps: drop that line from a manifest.
  const auto without_steps = [](const std::string& path, const std::string& line) {
    std::string text = loom_test::read_file(path);
    text.erase(text.find(line), line.size());
    std::ofstream(path) << text;
    return path;
  };
  const std::string m = without_steps(epoch_manifest(dir, 1, "by-epochs"), "steps = 1\n");
  const auto r = run_host("run " + m + " --set run.epochs=2");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const int64_t M = batches_per_epoch(r.err);
  const int64_t steps = (2 * M + 1) / 2;  // 2 epochs of M micro-batches, 2 per step, rounded up
  const auto lines = lines_of(dir / "by-epochs" / "events.txt");
  const auto ends = lines_starting(lines, "epoch_end");
  REQUIRE(ends.size() == 2);
  CHECK(ends.back() == "epoch_end " + std::to_string(steps) + " 1");  // after the last step: 2M divides by 2
  CHECK(lines.back() == "train_end " + std::to_string(steps) + " 2");
  CHECK(loom_test::logged_losses(dir / "by-epochs").size() == static_cast<size_t>(steps));

  // One epoch, then resumed to two: the same losses and epoch ends as the run above.
  const std::string split = without_steps(epoch_manifest(dir, 1, "split"), "steps = 1\n");
  REQUIRE(run_host("run " + split + " --set run.epochs=1").code == 0);
  const auto resumed = run_host("run " + split + " --set run.epochs=2");
  REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  CHECK(loom_test::logged_losses(dir / "split") == loom_test::logged_losses(dir / "by-epochs"));
  CHECK(lines_starting(lines_of(dir / "split" / "events.txt"), "epoch_end") == ends);

  const auto both = run_host("run " + m + " --set run.epochs=2 --set run.steps=4");
  CHECK(both.code == 2);
  CHECK(both.err.find("[run] sets both steps and epochs") != std::string::npos);
  const std::string endless = without_steps(manifest(dir, 3, ""), "steps = 3\n");
  const auto refused = run_host("run " + endless + " --set run.epochs=1");
  CHECK(refused.code == 2);
  CHECK(refused.err.find("[data] synthetic does not say how many batches an epoch holds") != std::string::npos);
}

// Issue 34: a step's loss and grad norm stay on the device until a log step reads them, so on a
// GPU the host never waits inside a step; a hook that reads them every step still gets them.
TEST_CASE("a step's loss is read at log steps, or every step for a hook that says it reads it") {
  const fs::path dir = loom_test::tmp_dir("events-step-values");
  const auto values_of = [&](const std::string& name, const char* reads) {
    const fs::path sub = dir / name;
    fs::create_directories(sub);
    const auto r = run_host("run " + manifest(sub, 6, std::string("values = true\nreads_step_values = ") + reads));
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return recorded(sub);
  };
  const auto field = [](const std::string& line, int i) {
    std::istringstream in(line);
    std::string word;
    for (int k = 0; k <= i; ++k) in >> word;
    return word;
  };
  const auto deferred = values_of("deferred", "false");
  const auto every = values_of("every", "true");
  REQUIRE(deferred.size() == every.size());
  int logs = 0;
  for (size_t i = 0; i < deferred.size(); ++i) {
    const std::string event = field(deferred[i], 0);
    const bool in_step = event == "after_backward" || event == "before_optimizer_step" || event == "step_end";
    INFO(deferred[i] << " | " << every[i]);
    if (in_step) {
      CHECK(field(deferred[i], 2) == "nan");  // not read: the events before log do not know it
      CHECK(field(every[i], 2) != "nan");
    }
    if (event == "log") {
      ++logs;
      CHECK(deferred[i] == every[i]);  // the same loss and grad norm, read later
    }
  }
  CHECK(logs == 2);
  // The trackers' records are the same to the bit: the window's losses are summed in double.
  CHECK(lines_of(dir / "deferred" / "r" / "metrics.jsonl").size() == 2);
  const auto strip_times = [&](const fs::path& file) {
    std::vector<std::string> out;
    for (const std::string& line : lines_of(file)) {
      nlohmann::json j = nlohmann::json::parse(line);
      out.push_back(nlohmann::json{{"loss", j.at("loss")}, {"grad_norm", j.at("grad_norm")}}.dump());
    }
    return out;
  };
  CHECK(strip_times(dir / "deferred" / "r" / "metrics.jsonl") == strip_times(dir / "every" / "r" / "metrics.jsonl"));
}
