// token_file.cpp: the `token_file` dataset. Reads a Loom token file (written by loom-tokenize;
// format in common/token_file_format.hpp) through a memory map, never into RAM as a whole:
// each batch copies its windows out of the map and hands their pages back, so the resident
// set stays small even for files far larger than memory. Windows, epochs, sharding across
// ranks and the resume state come from common/window_sampler.hpp. Torch-free.
#include <loom/dataset.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "mapped_file.hpp"
#include "plugins/datasets/common/dataset_plugin.hpp"
#include "plugins/datasets/common/little_endian.hpp"
#include "plugins/datasets/common/token_file_format.hpp"
#include "plugins/datasets/common/window_epochs.hpp"

namespace {

using namespace loom::data;

// Index of the first token >= limit among tokens [0, count) of type U at `tokens`, or count.
// Scans in chunks and releases each one, so checking a huge file keeps the resident set small.
template <class U>
uint64_t first_token_at_least(const MappedTokenFile& file, uint64_t count, uint64_t limit) {
  constexpr uint64_t kChunk = uint64_t(1) << 22;  // tokens per chunk
  const unsigned char* tokens = file.data() + kTokenFileHeaderBytes;
  for (uint64_t begin = 0; begin < count; begin += kChunk) {
    const uint64_t end = std::min(count, begin + kChunk);
    uint64_t max = 0;
    for (uint64_t i = begin; i < end; ++i) max = std::max<uint64_t>(max, load_le<U>(tokens + i * sizeof(U)));
    if (max >= limit)
      for (uint64_t i = begin; i < end; ++i)
        if (load_le<U>(tokens + i * sizeof(U)) >= limit) return i;
    file.release(kTokenFileHeaderBytes + begin * sizeof(U), kTokenFileHeaderBytes + end * sizeof(U));
  }
  return count;
}

class TokenFile final : public loom::Dataset {
 public:
  static constexpr const char* name = "token_file";
  static constexpr const char* summary =
      "Windows of a Loom token file (uint16/uint32 ids, made by loom-tokenize), memory-mapped; "
      "shuffled per epoch, sharded across ranks.";
  static constexpr loom_option_spec options[] = {
      loom::required_option("path", LOOM_OPTION_TYPE_STRING,
                            "Token file made by loom-tokenize; relative paths start at the current directory."),
      loom::option("batch_size", LOOM_OPTION_TYPE_INT, "8", "Sequences per micro-batch (B)."),
      loom::option("report_epochs", LOOM_OPTION_TYPE_BOOL, "false", kReportEpochsDoc),
      loom::option("seq_len", LOOM_OPTION_TYPE_INT, "256", "Tokens per sequence (T); windows hold T + 1."),
      loom::option("vocab_size", LOOM_OPTION_TYPE_INT, "0",
                   "When > 0, every token id must be below it (checked once at start); match [model] vocab_size."),
  };

  TokenFile(const loom::Config& c, const loom::Context& ctx)
      : path_(c.str("path")),
        B_(c.i64("batch_size")),
        T_(c.i64("seq_len")),
        file_(open(path_)),
        header_(with_loom_errors([&] {
          const unsigned char* bytes = file_.data();
          const unsigned char empty[kTokenFileHeaderBytes] = {};
          return parse_token_file_header(bytes ? bytes : empty, file_.size(), path_);
        })),
        windows_(c.flag("report_epochs"), with_loom_errors([&] {
                   return WindowSampler(sampler_config(name, B_, T_, header_.token_count, ctx), path_);
                 })) {
    file_.release(0, kTokenFileHeaderBytes);  // parsed; drop its pages from the resident set
    check_vocab(c.i64("vocab_size"));
    file_.advise(MADV_RANDOM);  // windows come in shuffled order: read ahead nothing
    loom::log(LOOM_LOG_LEVEL_INFO, name,
              path_ + ": " + std::to_string(header_.token_count) + " " + token_dtype_name(header_.token_bytes) +
                  " tokens, " + windows_.summary(B_, T_, ctx.world_size));
  }

  Batch next() override {
    if (!windows_.next(starts_)) return epoch_end();
    const uint64_t S = header_.token_bytes, n = uint64_t(T_) + 1;
    return window_batch(starts_, T_, [&](uint64_t start, int64_t* out) {
      const uint64_t offset = kTokenFileHeaderBytes + start * S;
      const unsigned char* p = file_.data() + offset;
      if (S == 2)
        for (uint64_t i = 0; i < n; ++i) out[i] = load_le<uint16_t>(p + 2 * i);
      else
        for (uint64_t i = 0; i < n; ++i) out[i] = load_le<uint32_t>(p + 4 * i);
      file_.release(offset, offset + n * S);
    });
  }

  std::string save_state() const override { return windows_.save_state(); }
  int64_t batches_per_epoch() const override { return windows_.batches_per_epoch(); }
  void load_state(const std::string& state) override { with_loom_errors([&] { windows_.load_state(state); }); }

 private:
  static MappedTokenFile open(const std::string& path) {
    return with_loom_errors([&] {
      return MappedTokenFile(path, "create it with `loom-tokenize INPUT... -o " + path + "`");
    });
  }

  // vocab_size > 0: one pass over the file so that a bad id fails now, not hours into a run.
  void check_vocab(int64_t vocab_size) const {
    if (vocab_size < 0) throw loom::Error("token_file: vocab_size must be >= 0 (0 turns the check off)");
    const uint64_t max_id = header_.token_bytes == 2 ? 0xFFFF : 0xFFFFFFFF;
    if (vocab_size == 0 || uint64_t(vocab_size) > max_id) return;  // nothing to check, or no id can fail
    file_.advise(MADV_SEQUENTIAL);
    const uint64_t V = uint64_t(vocab_size), count = header_.token_count;
    const uint64_t at = header_.token_bytes == 2 ? first_token_at_least<uint16_t>(file_, count, V)
                                                 : first_token_at_least<uint32_t>(file_, count, V);
    if (at == count) return;
    const unsigned char* p = file_.data() + kTokenFileHeaderBytes + at * header_.token_bytes;
    const uint64_t id = header_.token_bytes == 2 ? load_le<uint16_t>(p) : load_le<uint32_t>(p);
    throw loom::Error(path_ + ": the token at element offset " + std::to_string(at) + " has id " + std::to_string(id) +
                      ", not below vocab_size " + std::to_string(V) +
                      "; set [model] vocab_size (and [data] vocab_size) to at least " + std::to_string(id + 1) +
                      ", or re-tokenize the data with the model's tokenizer");
  }

  std::string path_;
  int64_t B_, T_;
  MappedTokenFile file_;
  TokenFileHeader header_;
  WindowEpochs windows_;
  std::vector<uint64_t> starts_;
};

}  // namespace

LOOM_PLUGIN("token_file", "0.1.0", loom::component<TokenFile>())
