// document_stream.hpp: one rank's endless stream of training windows from Parquet or Arrow
// tables (formats/table_file.hpp), read part by part so that no corpus is ever in memory.
//
//   - Units: every non-empty part (a Parquet row group, an Arrow record batch) of every file, in
//     file order. Epoch e visits them in an order drawn from (seed, e) (or in file order when
//     shuffle is off); rank r of R takes positions r, r + R, r + 2R, ... of that order, so no
//     two ranks read the same rows, and each rank starts its next epoch when its own units end.
//   - Block: one unit's rows, each a document: a text column tokenized (with the tokenizer's
//     special tokens when asked) and followed by the separator, or a token-id column taken as
//     it is. The block's tokens are what the last block left over (the carry, fewer than
//     T + 1) followed by the unit's documents.
//   - Windows: a block of n tokens gives floor((n - 1) / T) windows of T + 1 tokens with stride
//     T, visited in an order drawn from (seed, epoch, block) (the shuffle buffer is the block);
//     the tokens from the last window's end on carry into the next block, so the rank's data is
//     one continuous token stream.
//   - Position: (epoch, block, next window, the carry the block started with). A resume
//     rebuilds that block from its unit and continues with exactly the windows that followed.
//   - Another world size: the positions every saved rank reached give this rank a prelude, its
//     share of what they had left, read as its epoch E (saved_world.hpp); epochs after it are
//     dealt as above. Until the prelude ends, the position needs the saved ranks' positions too.
//
// The next block's unit is read and tokenized on a helper thread while the current one is
// consumed; tokenizing a unit splits its rows over `threads` threads. Torch-free, SDK-free;
// errors are loom::data::DataError.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plugins/datasets/parquet/part_tokens.hpp"

namespace loom::parquet_data {

struct StreamConfig {
  std::vector<std::string> files;  // resolved (formats/table_paths.hpp), in corpus order
  std::string column = "text";
  const tok::Tokenizer* tokenizer = nullptr;  // needed for a text column
  bool add_special_tokens = false;            // the tokenizer's own specials around each document
  std::optional<int32_t> separator;           // appended after each text document
  uint64_t seq_len = 0;                       // T
  uint64_t seed = 0;
  uint32_t rank = 0, world_size = 1;
  bool shuffle = true;
  unsigned threads = 1;
  uint64_t vocab_size = 0;  // > 0: every id must be below it
};

struct Unit {
  uint32_t file = 0;
  uint32_t part = 0;
  uint64_t rows = 0;
};

struct StreamPosition {
  uint64_t epoch = 0, block = 0, window = 0;
  std::vector<int32_t> carry;  // the tokens block `block` started with
};

struct Prelude;

class DocumentStream {
 public:
  // Opens every file once for its parts and columns. Throws a bad_input DataError for a
  // missing or mistyped column, a file that is not a table, or fewer units than ranks.
  explicit DocumentStream(StreamConfig config);
  ~DocumentStream();

  // The next window's T + 1 token ids.
  void next(std::vector<int64_t>& window);

  const StreamPosition& position() const { return position_; }
  // Moves to a saved position (next() then rebuilds its block). `saved`: the positions of the
  // run of another world size this one resumed, while its prelude is not over (saved_world()).
  // Throws a bad_input DataError when the position cannot be one of these units.
  void seek(StreamPosition p, std::vector<StreamPosition> saved = {});
  // Starts this rank's share of what a run of saved.size() ranks had left (saved_world.hpp).
  void resume_from(std::vector<StreamPosition> saved);
  // The saved ranks' positions while this rank still reads their prelude; empty otherwise.
  const std::vector<StreamPosition>& saved_world() const { return saved_; }

  uint64_t units() const { return units_.size(); }
  uint64_t rows() const { return rows_; }
  uint64_t units_on_this_rank(uint64_t epoch) const { return units_on_this_rank(epoch, prelude_.get()); }
  // A number that changes when the files' parts or rows do (saved with the position).
  uint64_t layout_digest() const { return digest_; }
  bool text_column() const { return text_; }

 private:
  struct Block;
  struct Source {
    uint64_t epoch, slot;  // the unit at place slot of epoch's order; its windows' order too
  };
  std::vector<int32_t> unit_tokens(const Unit& unit) const;  // one unit's documents, tokenized (parts_)
  Source source_at(uint64_t epoch, uint64_t block) const;
  const Unit& unit_of(Source source) const;
  // (epoch, block) itself, or the first block after it when its epoch has no block on this rank.
  std::pair<uint64_t, uint64_t> first_block_from(uint64_t epoch, uint64_t block) const;
  void enter_block();     // position_ now at a block's start: a prelude block in progress sets its own
  void build_block();     // the block at position_ from its unit (or the prefetched tokens)
  void prefetch_next();   // starts tokenizing the unit after position_'s on the helper thread
  void advance_block();   // to the next block (or epoch), carrying the leftover tokens
  std::unique_ptr<Prelude> deal(const std::vector<StreamPosition>& saved) const;  // null for none
  uint64_t units_on_this_rank(uint64_t epoch, const Prelude* prelude) const;
  // Drops the block and prefetch, then takes the position, the prelude and its saved positions.
  void move_to(StreamPosition p, std::unique_ptr<Prelude> prelude, std::vector<StreamPosition> saved);

  StreamConfig c_;
  std::vector<Unit> units_;
  uint64_t rows_ = 0, digest_ = 0;
  bool text_ = true;
  PartTokens parts_;  // how a unit's rows become tokens
  StreamPosition position_;
  std::vector<StreamPosition> saved_;  // a run of another world size's positions, while prelude_ lasts
  std::unique_ptr<Prelude> prelude_;
  std::unique_ptr<Block> block_;
  // The tokens of the unit at (epoch, block) of prefetch_at_, being made on the helper thread.
  std::future<std::vector<int32_t>> prefetch_;
  uint64_t prefetch_epoch_ = 0, prefetch_block_ = 0;
  mutable std::vector<int64_t> order_cache_;  // the order of units_ for order_epoch_
  mutable uint64_t order_epoch_ = UINT64_MAX;
};

}  // namespace loom::parquet_data
