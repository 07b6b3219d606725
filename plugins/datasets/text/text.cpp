// text.cpp: the `text` dataset. Byte-level language modelling on plain text: every byte of
// the files is one token (vocab 256), so no tokenizer is needed. The files come from
// common/text_files.hpp (the same walk loom-tokenize does), windows, epochs, sharding and the
// resume state from common/window_sampler.hpp. Torch-free.
//
// The whole corpus is read into memory at create: the corpora this is for (a source tree,
// some docs) are megabytes. For anything large, run loom-tokenize once and train with the
// memory-mapped `token_file` dataset instead, which reads exactly the same tokens.
#include <loom/dataset.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "dataset_plugin.hpp"
#include "text_files.hpp"
#include "epoch_ends.hpp"
#include "window_sampler.hpp"

namespace {

using namespace loom::data;

class Text final : public loom::Dataset {
 public:
  static constexpr const char* name = "text";
  static constexpr const char* summary =
      "Byte-level tokens (vocab 256) from UTF-8 text files or a directory of them; shuffled per epoch, "
      "sharded across ranks.";
  static constexpr loom_option_spec options[] = {
      loom::required_option("path", LOOM_OPTION_TYPE_STRING,
                            "A text file or a directory walked recursively (sorted; hidden and build* dirs "
                            "skipped); relative paths start at the current directory."),
      loom::option("extensions", LOOM_OPTION_TYPE_STRING, ".txt,.md",
                   "Comma-separated extensions of the files taken from a directory, e.g. \".cpp,.hpp,.md\"."),
      loom::option("batch_size", LOOM_OPTION_TYPE_INT, "8", "Sequences per micro-batch (B)."),
      loom::option("report_epochs", LOOM_OPTION_TYPE_BOOL, "false", kReportEpochsDoc),
      loom::option("seq_len", LOOM_OPTION_TYPE_INT, "256", "Tokens (bytes) per sequence (T); windows hold T + 1."),
  };

  Text(const loom::Config& c, const loom::Context& ctx)
      : path_(c.str("path")),
        B_(c.i64("batch_size")),
        T_(c.i64("seq_len")),
        epochs_(c.flag("report_epochs")),
        files_(with_loom_errors([&] {
          TextWalkOptions walk;
          walk.extensions = parse_extensions(c.str("extensions"));
          // Never train on the run's own output: skip the folder runs are written into.
          if (!ctx.run_dir.empty()) {
            const std::filesystem::path run_dir(ctx.run_dir);
            walk.exclude_dirs = {run_dir, run_dir.parent_path()};
          }
          return collect_text_files({path_}, walk);
        })),
        corpus_(with_loom_errors([&] {
          std::string corpus;
          for (const auto& f : files_) append_file_bytes(f, corpus);
          return corpus;
        })),
        sampler_(with_loom_errors([&] {
          return WindowSampler(sampler_config(name, B_, T_, corpus_.size(), ctx), path_);
        })) {
    loom::log(LOOM_LOG_LEVEL_INFO, name,
              path_ + ": " + std::to_string(files_.size()) + " file(s), " + std::to_string(corpus_.size()) + " bytes, " +
                  std::to_string(sampler_.windows()) + " windows of " + std::to_string(T_ + 1) + ", " +
                  std::to_string(sampler_.batches_per_epoch()) + " batches of " + std::to_string(B_) +
                  " per epoch on each of " + std::to_string(ctx.world_size) + " rank(s)");
  }

  Batch next() override {
    if (epochs_.take()) return epoch_end();
    sampler_.next(starts_);
    epochs_.after_batch(sampler_);
    const auto* bytes = reinterpret_cast<const unsigned char*>(corpus_.data());
    return window_batch(starts_, T_, [&](uint64_t start, int64_t* out) {
      for (int64_t i = 0; i <= T_; ++i) out[i] = bytes[start + uint64_t(i)];
    });
  }

  std::string save_state() const override { return epochs_.save(sampler_.save_state()); }
  int64_t batches_per_epoch() const override {
    return epochs_.reported() ? static_cast<int64_t>(sampler_.batches_per_epoch()) : 0;
  }
  void load_state(const std::string& state) override {
    with_loom_errors([&] { sampler_.load_state(epochs_.load(state)); });
  }

 private:
  std::string path_;
  int64_t B_, T_;
  EpochEnds epochs_;
  std::vector<std::filesystem::path> files_;  // corpus order
  std::string corpus_;                        // every file's bytes, concatenated in that order
  WindowSampler sampler_;
  std::vector<uint64_t> starts_;
};

}  // namespace

LOOM_PLUGIN("text", "0.1.0", loom::component<Text>())
