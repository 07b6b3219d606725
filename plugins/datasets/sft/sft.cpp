// sft.cpp: the `sft` dataset: supervised fine-tuning on instruction data in JSON Lines, with the
// model's own tokenizer and chat template, loss only on what train_on names, packed rows whose
// attention never crosses samples. Torch-free.
//
// Pipeline: sft_records (JSONL line -> sample) -> sft_encode (template turn boundaries -> ids and
// trained flags) -> sft_cache (once, in parallel, cached by content) -> row_packer (per epoch,
// per rank) -> batches with input_ids, labels, position_ids, document_ids and attention_mask.
#include <loom/dataset.hpp>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "chat_render.hpp"
#include "formats/files.hpp"
#include "formats/format_error.hpp"
#include "row_packer.hpp"
#include "sft_cache.hpp"
#include "sft_tables.hpp"

namespace {

using namespace loom::sft;
namespace fs = std::filesystem;

constexpr int64_t kIgnore = LOOM_IGNORE_INDEX;

bool is_data_file(const fs::path& p) { return p.extension() == ".jsonl" || is_table_file(p.string()); }

// "a.jsonl,dir" -> the files: each named file, and each folder's *.jsonl, *.parquet and *.arrow
// in name order (a save_to_disk folder: the files its state.json lists).
std::vector<std::string> data_files(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    std::error_code ec;
    if (fs::is_directory(item, ec) && loom::formats::path_exists(loom::formats::join(item, "state.json"))) {
      try {  // a folder datasets' save_to_disk wrote: the files its state.json lists
        const auto saved = saved_dataset_files(item);
        out.insert(out.end(), saved.begin(), saved.end());
      } catch (const std::invalid_argument& e) {
        throw loom::Error(std::string("sft: ") + e.what(), LOOM_STATUS_CODE_INVALID_ARGUMENT);
      }
    } else if (fs::is_directory(item, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(item, ec))
        if (is_data_file(entry.path()) && loom::formats::is_regular_file(entry.path().string()))
          found.push_back(entry.path().string());
      std::sort(found.begin(), found.end());
      if (found.empty())
        throw loom::Error("sft: folder " + item + " holds no .jsonl, .parquet or .arrow file", LOOM_STATUS_CODE_INVALID_ARGUMENT);
      out.insert(out.end(), found.begin(), found.end());
    } else if (loom::formats::is_regular_file(item)) {
      out.push_back(item);
    } else if (loom::formats::path_exists(item)) {
      throw loom::Error("sft: [data] files names " + item + ", which is not a regular file (a FIFO or a device is never read)",
                        LOOM_STATUS_CODE_INVALID_ARGUMENT);
    } else {
      throw loom::Error("sft: [data] files names " + item + ", which does not exist", LOOM_STATUS_CODE_INVALID_ARGUMENT);
    }
  }
  if (out.empty()) throw loom::Error("sft: [data] files is empty; name .jsonl files or folders", LOOM_STATUS_CODE_INVALID_ARGUMENT);
  return out;
}

std::string default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/loom/sft";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/loom/sft";
  return ".cache/loom/sft";
}

// What identifies the tokenizer for the cache key: its files' bytes.
std::string tokenizer_identity(const std::string& path) {
  std::string out;
  const bool dir = fs::is_directory(path);
  for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "chat_template.jinja"}) {
    const std::string file = dir ? loom::formats::join(path, name) : path;
    if (loom::formats::path_exists(file)) out += loom::formats::read_text_file(file, 1ull << 30);
    if (!dir) break;
  }
  return out;
}

template <class Fn>
auto invalid_as_loom_error(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::invalid_argument& e) {
    throw loom::Error(std::string("sft: ") + e.what(), LOOM_STATUS_CODE_INVALID_ARGUMENT);
  } catch (const loom::tok::TokenizerError& e) {
    throw loom::Error(std::string("sft: tokenizer: ") + e.what(), LOOM_STATUS_CODE_INVALID_ARGUMENT);
  } catch (const loom::formats::FormatError& e) {
    throw loom::Error(std::string("sft: tokenizer: ") + e.what(), LOOM_STATUS_CODE_INVALID_ARGUMENT);
  }
}

class Sft final : public loom::Dataset {
 public:
  static constexpr const char* name = "sft";
  static constexpr const char* summary =
      "Instruction data (JSONL, Parquet or Arrow rows: messages, prompt/completion or text) through the model's tokenizer and chat "
      "template; loss only on trained turns; packed rows; tokenized once into a cache.";
  static constexpr loom_option_spec options[] = {
      loom::required_option("files", LOOM_OPTION_TYPE_STRING,
                            "JSONL, Parquet or Arrow files, or folders of them (every *.jsonl, *.parquet, *.arrow in name order; a datasets save_to_disk folder), comma-separated."),
      loom::required_option("tokenizer", LOOM_OPTION_TYPE_STRING,
                            "The model's tokenizer: a folder with tokenizer.json or tokenizer.model (e.g. the Hugging Face "
                            "model folder), or the file."),
      loom::option("chat_template", LOOM_OPTION_TYPE_STRING, "",
                   "\"\": the tokenizer folder's own; a built-in name (chatml, llama3); a .jinja file; \"none\": no "
                   "template (prompt + completion + EOS; messages refused)."),
      loom::option("format", LOOM_OPTION_TYPE_STRING, "auto",
                   "auto (by the fields each line has), messages, prompt_completion or text."),
      loom::option("messages_field", LOOM_OPTION_TYPE_STRING, "messages", "Field holding the list of messages."),
      loom::option("prompt_field", LOOM_OPTION_TYPE_STRING, "prompt", "Field holding the prompt."),
      loom::option("completion_field", LOOM_OPTION_TYPE_STRING, "completion", "Field holding the completion."),
      loom::option("text_field", LOOM_OPTION_TYPE_STRING, "text", "Field holding plain text (all of it trained)."),
      loom::option("train_on", LOOM_OPTION_TYPE_STRING, "assistant",
                   "Which tokens carry loss: assistant (every assistant turn), last_assistant, or all."),
      loom::option("max_length", LOOM_OPTION_TYPE_INT, "0", "Tokens per sample; 0: seq_len + 1. Longer samples are cut or dropped (truncation)."),
      loom::option("truncation", LOOM_OPTION_TYPE_STRING, "right", "right: keep a long sample's first max_length tokens; drop: skip it."),
      loom::option("packing", LOOM_OPTION_TYPE_BOOL, "true",
                   "Pack samples into rows (positions restart and attention stays inside each sample); false: one padded sample per row."),
      loom::option("seq_len", LOOM_OPTION_TYPE_INT, "512", "Positions per row (T); match [model] seq_len."),
      loom::option("batch_size", LOOM_OPTION_TYPE_INT, "8", "Rows per micro-batch (B)."),
      loom::option("on_bad_line", LOOM_OPTION_TYPE_STRING, "error",
                   "A malformed line (or one the template refuses): error stops the run naming file and line; skip counts it."),
      loom::option("cache_dir", LOOM_OPTION_TYPE_STRING, "",
                   "Tokenization cache folder; \"\": $XDG_CACHE_HOME/loom/sft or ~/.cache/loom/sft."),
      loom::option("threads", LOOM_OPTION_TYPE_INT, "0", "Threads that tokenize; 0: every CPU the process may use."),
      loom::option("vocab_size", LOOM_OPTION_TYPE_INT, "0", "When > 0, every token id must be below it; match [model] vocab_size."),
  };

  Sft(const loom::Config& c, const loom::Context& ctx) : seed_(ctx.seed) {
    T_ = c.i64("seq_len");
    B_ = c.i64("batch_size");
    if (T_ <= 1 || B_ <= 0) throw loom::Error("sft: seq_len must be > 1 and batch_size > 0", LOOM_STATUS_CODE_INVALID_ARGUMENT);
    packing_ = c.flag("packing");
    const std::string on_bad = c.str("on_bad_line");
    if (on_bad != "error" && on_bad != "skip")
      throw loom::Error("sft: on_bad_line must be error or skip, got \"" + on_bad + "\"", LOOM_STATUS_CODE_INVALID_ARGUMENT);
    const std::string tokenizer_path = c.str("tokenizer");
    tokenizer_ = invalid_as_loom_error([&] { return loom::tok::load_tokenizer(tokenizer_path); });
    pad_id_ = tokenizer_->info().pad_id.value_or(0);

    BuildInputs in;
    in.files = data_files(c.str("files"));
    in.tokenizer = tokenizer_.get();
    in.tokenizer_identity = tokenizer_identity(tokenizer_path);
    const ChatRenderer chat = invalid_as_loom_error([&] { return make_chat_renderer(c.str("chat_template"), *tokenizer_); });
    in.render = chat.render;
    in.template_source = chat.source;
    in.format = {c.str("format"), c.str("messages_field"), c.str("prompt_field"), c.str("completion_field"), c.str("text_field")};
    in.encode = {c.str("train_on"), c.i64("max_length") > 0 ? c.i64("max_length") : T_ + 1, c.str("truncation")};
    in.skip_bad_lines = on_bad == "skip";
    const int64_t threads = c.i64("threads");
    in.threads = threads > 0 ? static_cast<unsigned>(threads) : std::max(1u, std::thread::hardware_concurrency());
    invalid_as_loom_error([&] {
      check_format(in.format);
      check_encode_options(in.encode);
      if (in.encode.max_length > T_ + 1)
        throw std::invalid_argument("max_length " + std::to_string(in.encode.max_length) + " does not fit a row of seq_len " +
                                    std::to_string(T_) + " (at most seq_len + 1)");
    });
    const std::string cache = c.str("cache_dir").empty() ? default_cache_dir() : c.str("cache_dir");
    auto log = [](const std::string& m) { loom::log(LOOM_LOG_LEVEL_INFO, name, m); };
    log("chat template: " + chat.origin);
    data_ = invalid_as_loom_error([&] { return load_or_build(in, cache, log); });
    check_vocab(c.i64("vocab_size"));

    for (size_t i = 0; i < data_.samples(); ++i) {
      positions_.push_back(static_cast<uint32_t>(data_.offsets[i + 1] - data_.offsets[i] - 1));
      uint32_t trained = 0;
      for (uint64_t t = data_.offsets[i] + 1; t < data_.offsets[i + 1]; ++t) trained += data_.trained[t];
      trained_.push_back(trained);
    }
    pack_ = {static_cast<uint32_t>(T_), packing_, seed_, static_cast<uint32_t>(ctx.rank), static_cast<uint32_t>(ctx.world_size)};
    prepare_epoch(0);
    const DataStats& s = data_.stats;
    log(std::to_string(s.lines) + " lines: " + std::to_string(data_.samples()) + " samples kept, " + std::to_string(s.truncated) +
        " truncated to max_length, " + std::to_string(s.too_long) + " too long (dropped), " + std::to_string(s.no_trainable) +
        " with no trainable token (dropped), " + std::to_string(s.bad_lines) + " bad lines (skipped)");
    if (batches_per_epoch() == 0)
      throw loom::Error("sft: an epoch has " + std::to_string(rows_.rows.size()) + " rows on this rank, fewer than batch_size " +
                            std::to_string(B_) + "; lower batch_size or add data",
                        LOOM_STATUS_CODE_INVALID_ARGUMENT);
  }

  Batch next() override {
    if (end_due_) {
      end_due_ = false;
      return epoch_end();
    }
    Batch b = make_batch(batch_);
    if (++batch_ == static_cast<uint64_t>(batches_per_epoch())) {
      prepare_epoch(epoch_ + 1);
      end_due_ = true;
    }
    return b;
  }

  int64_t batches_per_epoch() const override { return static_cast<int64_t>(rows_.rows.size()) / B_; }

  std::string save_state() const override {
    return std::to_string(epoch_) + " " + std::to_string(batch_) + " " + (end_due_ ? "1" : "0");
  }
  void load_state(const std::string& state) override {
    unsigned long long epoch = 0, batch = 0;
    int due = 0;
    if (std::sscanf(state.c_str(), "%llu %llu %d", &epoch, &batch, &due) != 3)
      throw loom::Error("sft: the saved data position is not one this dataset wrote", LOOM_STATUS_CODE_INVALID_ARGUMENT);
    prepare_epoch(epoch);
    if (batch >= static_cast<uint64_t>(batches_per_epoch()))
      throw loom::Error("sft: the saved data position is past the end of an epoch; the data or options changed since",
                        LOOM_STATUS_CODE_INVALID_ARGUMENT);
    batch_ = batch;
    end_due_ = due == 1;
  }

 private:
  void prepare_epoch(uint64_t epoch) {
    epoch_ = epoch;
    batch_ = 0;
    rows_ = pack_epoch(positions_, trained_, pack_, epoch);
    loom::log(LOOM_LOG_LEVEL_INFO, name,
              "epoch " + std::to_string(epoch) + ": " + std::to_string(rows_.all_rows) + " rows of " + std::to_string(T_) + " (" +
                  (packing_ ? "packed" : "padded") + "), non-pad " + percent(rows_.nonpad) + ", loss-carrying " +
                  percent(rows_.loss_tokens) + ", " + std::to_string(batches_per_epoch()) + " batches of " + std::to_string(B_) +
                  " on this rank" + (rows_.dropped_rows ? ", " + std::to_string(rows_.dropped_rows) + " rows left over for even ranks" : ""));
  }

  static std::string percent(double f) {
    char text[16];
    std::snprintf(text, sizeof text, "%.1f%%", 100 * f);
    return text;
  }

  Batch make_batch(uint64_t batch) const {
    const size_t n = static_cast<size_t>(B_ * T_);
    std::vector<int64_t> inputs(n, pad_id_), labels(n, kIgnore), positions(n, 0), documents(n, 0), mask(n, 0);
    for (int64_t b = 0; b < B_; ++b) {
      const Row& row = rows_.rows[static_cast<size_t>(batch) * static_cast<size_t>(B_) + static_cast<size_t>(b)];
      size_t t = static_cast<size_t>(b * T_);
      int64_t document = 0;
      for (const Segment& seg : row.segments) {
        const uint64_t first = data_.offsets[seg.sample];
        for (uint32_t j = 0; j < seg.positions; ++j, ++t) {
          inputs[t] = data_.ids[first + j];
          labels[t] = data_.trained[first + j + 1] ? data_.ids[first + j + 1] : kIgnore;
          positions[t] = j;
          documents[t] = document;
          mask[t] = 1;
        }
        ++document;
      }
      for (; t < static_cast<size_t>((b + 1) * T_); ++t) documents[t] = document;  // padding: a document of its own
    }
    const std::vector<int64_t> shape{B_, T_};
    return {loom::dlpack_int64(std::move(inputs), shape),
            loom::dlpack_int64(std::move(labels), shape),
            {{"position_ids", loom::dlpack_int64(std::move(positions), shape)},
             {"document_ids", loom::dlpack_int64(std::move(documents), shape)},
             {"attention_mask", loom::dlpack_int64(std::move(mask), shape)}}};
  }

  void check_vocab(int64_t vocab_size) const {
    if (vocab_size <= 0) return;
    for (const int32_t id : data_.ids)
      if (id >= vocab_size)
        throw loom::Error("sft: the tokenizer gives id " + std::to_string(id) + ", not below vocab_size " + std::to_string(vocab_size) +
                              "; the model's vocabulary must hold the tokenizer's (" + std::to_string(tokenizer_->vocab_size()) + ")",
                          LOOM_STATUS_CODE_INVALID_ARGUMENT);
  }

  uint64_t seed_;
  int64_t T_ = 0, B_ = 0;
  bool packing_ = true;
  int64_t pad_id_ = 0;
  std::unique_ptr<loom::tok::Tokenizer> tokenizer_;
  TokenizedData data_;
  std::vector<uint32_t> positions_, trained_;
  PackOptions pack_;
  EpochRows rows_;
  uint64_t epoch_ = 0, batch_ = 0;
  bool end_due_ = false;
};

}  // namespace

LOOM_PLUGIN("sft", "0.1.0", loom::component<Sft>())
