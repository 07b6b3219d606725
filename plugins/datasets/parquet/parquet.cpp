// parquet.cpp: the `parquet` dataset: pretraining on corpora as the Hugging Face Hub stores them
// (Parquet files such as FineWeb's, Arrow files and datasets' save_to_disk folders), streamed
// row group by row group, a text column tokenized in C++ with the model's own tokenizer, or a
// column of token ids taken as it is. Windows, the per-rank split, the shuffle and the exact
// resume: document_stream.hpp; the saved record: stream_state.hpp. Torch-free.
#include <loom/dataset.hpp>

#include <algorithm>
#include <optional>
#include <thread>

#include "formats/format_error.hpp"
#include "formats/table_paths.hpp"
#include "plugins/datasets/common/dataset_plugin.hpp"
#include "plugins/datasets/parquet/document_stream.hpp"
#include "plugins/datasets/parquet/stream_state.hpp"

namespace {

using namespace loom::parquet_data;
using loom::data::with_loom_errors;

template <class Fn>
auto as_loom_error(Fn&& fn) -> decltype(fn()) {
  try {
    return with_loom_errors(fn);
  } catch (const loom::formats::FormatError& e) {
    throw loom::Error(std::string("parquet: ") + e.what(), e.kind() == loom::formats::FormatError::Kind::io
                                                                ? LOOM_STATUS_CODE_INTERNAL
                                                                : LOOM_STATUS_CODE_INVALID_ARGUMENT);
  } catch (const loom::tok::TokenizerError& e) {
    throw loom::Error(std::string("parquet: tokenizer: ") + e.what(), LOOM_STATUS_CODE_INVALID_ARGUMENT);
  } catch (const loom::Error& e) {
    throw loom::Error(std::string("parquet: ") + e.what(), e.code());
  }
}

class Parquet final : public loom::Dataset {
 public:
  static constexpr const char* name = "parquet";
  static constexpr const char* summary =
      "Pretraining on Parquet or Arrow tables (FineWeb-style folders, datasets' save_to_disk): a text column "
      "tokenized with the model's tokenizer, or token ids; streamed by row group, split across ranks, exact resume.";
  static constexpr loom_option_spec options[] = {
      loom::required_option("path", LOOM_OPTION_TYPE_STRING,
                            "Parquet/Arrow files, folders (walked for *.parquet and *.arrow, or a save_to_disk folder) or "
                            "glob patterns, comma-separated."),
      loom::option("column", LOOM_OPTION_TYPE_STRING, "text",
                   "The column read: text (string) is tokenized, a list of integers is taken as token ids."),
      loom::option("tokenizer", LOOM_OPTION_TYPE_STRING, "",
                   "The model's tokenizer (a folder with tokenizer.json, or the file); needed for a text column."),
      loom::option("add_special_tokens", LOOM_OPTION_TYPE_BOOL, "false",
                   "Each document with the tokenizer's own special tokens (BOS for Llama 3), as tokenizer(text) adds them."),
      loom::option("separator", LOOM_OPTION_TYPE_STRING, "eos",
                   "After each text document: eos (the tokenizer's end-of-text token), none, or a token of the vocabulary."),
      loom::option("batch_size", LOOM_OPTION_TYPE_INT, "8", "Sequences per micro-batch (B)."),
      loom::option("seq_len", LOOM_OPTION_TYPE_INT, "256", "Tokens per sequence (T); windows hold T + 1."),
      loom::option("document_mask", LOOM_OPTION_TYPE_BOOL, "false",
                   "Give position_ids restarting after each separator and document_ids, so attention stays inside a "
                   "document (packed pretraining); needs a separator (a text column)."),
      loom::option("shuffle", LOOM_OPTION_TYPE_BOOL, "true",
                   "Row groups in a new order each epoch and each row group's windows shuffled; false: file order."),
      loom::option("threads", LOOM_OPTION_TYPE_INT, "0", "Threads that tokenize a row group; 0: every CPU the process may use."),
      loom::option("vocab_size", LOOM_OPTION_TYPE_INT, "0", "When > 0, every token id must be below it; match [model] vocab_size."),
  };

  Parquet(const loom::Config& c, const loom::Context& ctx) {
    B_ = c.i64("batch_size");
    const int64_t T = c.i64("seq_len"), threads = c.i64("threads"), vocab = c.i64("vocab_size");
    if (B_ <= 0 || T <= 0) throw loom::Error("parquet: batch_size and seq_len must be positive", LOOM_STATUS_CODE_INVALID_ARGUMENT);
    if (threads < 0 || vocab < 0) throw loom::Error("parquet: threads and vocab_size must be >= 0", LOOM_STATUS_CODE_INVALID_ARGUMENT);
    StreamConfig sc;
    sc.files = as_loom_error([&] { return loom::formats::resolve_table_paths(c.str("path")); });
    sc.column = c.str("column");
    const std::string tokenizer = c.str("tokenizer");
    if (!tokenizer.empty()) {
      tokenizer_ = as_loom_error([&] { return loom::tok::load_tokenizer(tokenizer); });
      sc.tokenizer = tokenizer_.get();
      sc.separator = separator_ = separator_id(c.str("separator"));
    }
    sc.add_special_tokens = c.flag("add_special_tokens");
    sc.seq_len = uint64_t(T);
    sc.seed = ctx.seed;
    sc.rank = uint32_t(ctx.rank);
    sc.world_size = uint32_t(ctx.world_size);
    sc.shuffle = c.flag("shuffle");
    sc.threads = threads > 0 ? unsigned(threads) : std::max(1u, std::thread::hardware_concurrency());
    sc.vocab_size = uint64_t(vocab);
    check_ = {sc.rank, sc.world_size, sc.shuffle, sc.seed, sc.seq_len, 0};
    const size_t files = sc.files.size();
    stream_ = as_loom_error([&] { return std::make_unique<DocumentStream>(std::move(sc)); });
    check_.digest = stream_->layout_digest();
    if (c.flag("document_mask")) {
      if (!stream_->text_column() || !separator_)
        throw loom::Error("parquet: document_mask needs a separator between documents to tell them apart: a text column with "
                          "separator = eos or a token (not none)", LOOM_STATUS_CODE_INVALID_ARGUMENT);
      document_mask_ = true;
    }
    // The first row group read now, so that a bad one stops the run at create (exit 2).
    as_loom_error([&] { stream_->seek(StreamPosition{}); });
    if (!stream_->text_column() && tokenizer_)
      loom::log(LOOM_LOG_LEVEL_INFO, name, "column \"" + c.str("column") + "\" holds token ids: the tokenizer is not used");
    loom::log(LOOM_LOG_LEVEL_INFO, name,
              std::to_string(files) + " file(s), " + std::to_string(stream_->rows()) + " rows in " + std::to_string(stream_->units()) +
                  " row groups/batches, " + std::to_string(stream_->units_on_this_rank(0)) + " read by this rank; windows of " +
                  std::to_string(T + 1) + " tokens, " + (c.flag("shuffle") ? "shuffled" : "in file order"));
  }

  Batch next() override {
    std::vector<uint64_t> rows(static_cast<size_t>(B_));  // window_batch's "starts": row b is window b
    for (size_t b = 0; b < rows.size(); ++b) rows[b] = b;
    windows_.resize(size_t(B_));
    as_loom_error([&] {
      for (auto& w : windows_) stream_->next(w);
    });
    Batch batch = loom::data::window_batch(rows, int64_t(check_.seq_len), [&](uint64_t b, int64_t* out) {
      std::copy(windows_[b].begin(), windows_[b].end(), out);
    });
    if (document_mask_) add_document_fields(batch);
    return batch;
  }

  int64_t batches_per_epoch() const override { return 0; }  // endless: each rank's epochs are its own
  bool resumes_other_world_size() const override { return true; }
  std::string save_state() const override { return encode_state(check_, stream_->position(), stream_->saved_world()); }
  void load_state(const std::string& state) override {
    as_loom_error([&] {
      if (const auto records = loom::decode_saved_world(state)) return resume_from(*records);
      SavedState s = decode_state(state, check_);
      stream_->seek(std::move(s.position), std::move(s.saved_world));
    });
  }

 private:
  // A run of another world size saved these (ABI 1.20): this rank reads its share of what they had
  // left, then epochs of its own (saved_world.hpp).
  void resume_from(const std::vector<std::string>& records) {
    std::vector<StreamPosition> positions;
    for (size_t r = 0; r < records.size(); ++r) {
      StateCheck then = check_;
      then.rank = uint32_t(r);
      then.world_size = uint32_t(records.size());
      SavedState s = decode_state(records[r], then);
      if (!s.saved_world.empty())
        throw loom::data::bad_input("saved rank " + std::to_string(r) + " was still reading its share of what a run of " +
                                    std::to_string(s.saved_world.size()) + " ranks had left, in epoch " +
                                    std::to_string(s.position.epoch) + "; resume on " + std::to_string(records.size()) +
                                    " ranks from this checkpoint, or at another world size from one saved after that epoch");
      positions.push_back(std::move(s.position));
    }
    uint64_t last = 0;
    for (const StreamPosition& p : positions) last = std::max(last, p.epoch);
    stream_->resume_from(std::move(positions));
    const uint64_t mine = stream_->saved_world().empty() ? 0 : stream_->units_on_this_rank(last);
    loom::log(LOOM_LOG_LEVEL_INFO, name,
              "resumed from the positions of " + std::to_string(records.size()) + " ranks: this rank first reads " +
                  std::to_string(mine) + " of the row groups they had left of epochs up to " + std::to_string(last) +
                  ", then its share of each epoch after");
  }

  std::optional<int32_t> separator_id(const std::string& separator) const {
    if (separator == "none") return std::nullopt;
    if (separator == "eos") {
      if (tokenizer_->info().eos_id) return *tokenizer_->info().eos_id;
      throw loom::Error("parquet: the tokenizer names no end-of-text token (eos_token); set [data] separator to a token, or none",
                        LOOM_STATUS_CODE_INVALID_ARGUMENT);
    }
    if (const auto id = tokenizer_->token_id(separator)) return *id;
    throw loom::Error("parquet: [data] separator \"" + separator + "\" is not a token of the tokenizer; write eos, none or one of its tokens",
                      LOOM_STATUS_CODE_INVALID_ARGUMENT);
  }

  // position_ids and document_ids of each window's inputs: a document ends with the separator,
  // which is its last token (its target is the next document's first).
  void add_document_fields(Batch& batch) const {
    const int64_t T = int64_t(check_.seq_len);
    std::vector<int64_t> positions(size_t(B_ * T)), documents(size_t(B_ * T));
    for (int64_t b = 0; b < B_; ++b) {
      int64_t document = 0, position = 0;
      for (int64_t t = 0; t < T; ++t) {
        const size_t k = size_t(b * T + t);
        positions[k] = position++;
        documents[k] = document;
        if (windows_[size_t(b)][size_t(t)] == *separator_) ++document, position = 0;
      }
    }
    batch.fields.push_back({"position_ids", loom::dlpack_int64(std::move(positions), {B_, T})});
    batch.fields.push_back({"document_ids", loom::dlpack_int64(std::move(documents), {B_, T})});
  }

  int64_t B_ = 0;
  bool document_mask_ = false;
  std::optional<int32_t> separator_;
  std::unique_ptr<loom::tok::Tokenizer> tokenizer_;
  std::unique_ptr<DocumentStream> stream_;
  StateCheck check_;
  std::vector<std::vector<int64_t>> windows_;
};

}  // namespace

LOOM_PLUGIN("parquet", "0.1.0", loom::component<Parquet>())
