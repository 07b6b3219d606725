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

#include "plugins/datasets/common/dataset_plugin.hpp"
#include "plugins/datasets/common/text_files.hpp"
#include "plugins/datasets/common/window_epochs.hpp"

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
        windows_(c.flag("report_epochs"), with_loom_errors([&] {
                   return WindowSampler(sampler_config(name, B_, T_, corpus_.size(), ctx), path_);
                 })) {
    loom::log(LOOM_LOG_LEVEL_INFO, name,
              path_ + ": " + std::to_string(files_.size()) + " file(s), " + std::to_string(corpus_.size()) + " bytes, " +
                  windows_.summary(B_, T_, ctx.world_size));
  }

  Batch next() override {
    if (!windows_.next(starts_)) return epoch_end();
    const auto* bytes = reinterpret_cast<const unsigned char*>(corpus_.data());
    return window_batch(starts_, T_, [&](uint64_t start, int64_t* out) {
      for (int64_t i = 0; i <= T_; ++i) out[i] = bytes[start + uint64_t(i)];
    });
  }

  std::string save_state() const override { return windows_.save_state(); }
  int64_t batches_per_epoch() const override { return windows_.batches_per_epoch(); }
  void load_state(const std::string& state) override { with_loom_errors([&] { windows_.load_state(state); }); }

 private:
  std::string path_;
  int64_t B_, T_;
  std::vector<std::filesystem::path> files_;  // corpus order
  std::string corpus_;                        // every file's bytes, concatenated in that order
  WindowEpochs windows_;
  std::vector<uint64_t> starts_;
};

}  // namespace

LOOM_PLUGIN("text", "0.1.0", loom::component<Text>())
