// document_stream.cpp: DocumentStream (document_stream.hpp).
#include "plugins/datasets/parquet/document_stream.hpp"

#include "formats/table_file.hpp"

#include <algorithm>
#include <tuple>

#include "plugins/datasets/common/data_error.hpp"
#include "plugins/datasets/common/window_sampler.hpp"
#include "plugins/datasets/parquet/saved_world.hpp"

namespace loom::parquet_data {

using data::bad_input;

namespace {

constexpr uint64_t kWindowSalt = 0x706172712d77696eull;  // "parq-win": a block's window order

uint64_t fnv1a(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xFF)) * 0x100000001b3ull;
  return h;
}

}  // namespace

struct DocumentStream::Block {
  std::vector<int32_t> tokens;
  std::vector<uint64_t> order;  // window indices in visiting order
};

DocumentStream::DocumentStream(StreamConfig config) : c_(std::move(config)) {
  if (c_.seq_len == 0) throw bad_input("seq_len must be positive");
  if (c_.world_size == 0 || c_.rank >= c_.world_size) throw bad_input("rank is outside the world size");
  digest_ = 0xcbf29ce484222325ull;
  for (size_t f = 0; f < c_.files.size(); ++f) {
    const formats::TableFile table = as_data_error([&] { return formats::TableFile::open(c_.files[f]); });
    const formats::TableInfo& info = table.info();
    const size_t index = as_data_error([&] { return table.column(c_.column); });
    const formats::ColumnKind kind = info.columns[index].kind;
    if (kind == formats::ColumnKind::other)
      throw bad_input(c_.files[f] + ": column \"" + c_.column + "\" holds " + info.columns[index].type +
                      ", neither text (string) nor token ids (a list of integers); name another column");
    const bool text = kind == formats::ColumnKind::text;
    if (f == 0) text_ = text;
    if (text != text_)
      throw bad_input(c_.files[f] + ": column \"" + c_.column + "\" holds " + info.columns[index].type + " where " + c_.files[0] +
                      "'s holds " + (text_ ? "text" : "token ids") + "; every file of a corpus must hold the same kind");
    for (size_t p = 0; p < info.part_rows.size(); ++p) {
      digest_ = fnv1a(fnv1a(digest_, f), info.part_rows[p]);
      if (info.part_rows[p] == 0) continue;
      units_.push_back({uint32_t(f), uint32_t(p), info.part_rows[p]});
      rows_ += info.part_rows[p];
    }
  }
  parts_ = {c_.column, text_, c_.tokenizer, c_.add_special_tokens, c_.separator, c_.threads, c_.vocab_size};
  if (text_ && c_.tokenizer == nullptr)
    throw bad_input("column \"" + c_.column + "\" holds text, and no tokenizer is set; set [data] tokenizer to the model's folder");
  if (units_.size() < c_.world_size)
    throw bad_input(std::to_string(units_.size()) + " non-empty row group(s) or record batch(es) in " + std::to_string(c_.files.size()) +
                    " file(s), fewer than the " + std::to_string(c_.world_size) +
                    " ranks that each read their own; write the files with smaller row groups, or run on fewer ranks");
}

DocumentStream::~DocumentStream() {
  if (prefetch_.valid()) prefetch_.wait();
}

uint64_t DocumentStream::units_on_this_rank(uint64_t epoch, const Prelude* prelude) const {
  if (prelude && epoch == prelude->epoch) return prelude->items.size();
  return (units_.size() - c_.rank + c_.world_size - 1) / c_.world_size;
}

DocumentStream::Source DocumentStream::source_at(uint64_t epoch, uint64_t block) const {
  if (prelude_ && epoch == prelude_->epoch) return {prelude_->items[block].epoch, prelude_->items[block].slot};
  return {epoch, block * c_.world_size + c_.rank};
}

const Unit& DocumentStream::unit_of(Source source) const {
  if (order_epoch_ != source.epoch) {
    if (c_.shuffle) {
      data::shuffled_indices(c_.seed, source.epoch, units_.size(), order_cache_);
    } else {
      order_cache_.resize(units_.size());
      for (size_t i = 0; i < units_.size(); ++i) order_cache_[i] = int64_t(i);
    }
    order_epoch_ = source.epoch;
  }
  return units_[size_t(order_cache_[size_t(source.slot)])];
}

std::pair<uint64_t, uint64_t> DocumentStream::first_block_from(uint64_t epoch, uint64_t block) const {
  while (block >= units_on_this_rank(epoch)) ++epoch, block = 0;  // only a prelude can leave a rank none
  return {epoch, block};
}

void DocumentStream::enter_block() {
  if (!prelude_) return;
  if (position_.epoch > prelude_->epoch) {  // the prelude is over: later epochs are this run's own
    prelude_.reset();
    saved_.clear();
    return;
  }
  const PreludeItem& item = prelude_->items[size_t(position_.block)];
  if (item.in_progress) {  // a saved rank's block continues where that rank stood
    position_.carry = item.carry;
    position_.window = item.window;
  }
}

std::unique_ptr<Prelude> DocumentStream::deal(const std::vector<StreamPosition>& saved) const {
  if (saved.empty()) return nullptr;
  return std::make_unique<Prelude>(deal_prelude(saved, units_.size(), c_.rank, c_.world_size, c_.seq_len));
}

void DocumentStream::move_to(StreamPosition p, std::unique_ptr<Prelude> prelude, std::vector<StreamPosition> saved) {
  if (prefetch_.valid()) prefetch_.wait();
  prefetch_ = {};
  block_.reset();
  for (size_t r = 0; r < saved.size(); ++r)
    if (r % c_.world_size != c_.rank) saved[r].carry.clear();  // only the blocks this rank continues need theirs
  prelude_ = std::move(prelude);
  saved_ = std::move(saved);
  position_ = std::move(p);
}

std::vector<int32_t> DocumentStream::unit_tokens(const Unit& unit) const { return parts_.read(c_.files[unit.file], unit.part); }

void DocumentStream::prefetch_next() {
  const auto [epoch, block] = first_block_from(position_.epoch, position_.block + 1);
  const Unit unit = unit_of(source_at(epoch, block));
  prefetch_epoch_ = epoch;
  prefetch_block_ = block;
  prefetch_ = std::async(std::launch::async, [this, unit] { return unit_tokens(unit); });
}

void DocumentStream::build_block() {
  std::vector<int32_t> tokens;
  if (prefetch_.valid() && prefetch_epoch_ == position_.epoch && prefetch_block_ == position_.block) {
    tokens = prefetch_.get();
  } else {
    if (prefetch_.valid()) prefetch_.wait();  // a seek left it behind: its tokens are not needed
    prefetch_ = {};
    tokens = unit_tokens(unit_of(source_at(position_.epoch, position_.block)));
  }
  auto block = std::make_unique<Block>();
  block->tokens = position_.carry;
  block->tokens.insert(block->tokens.end(), tokens.begin(), tokens.end());
  const uint64_t T = c_.seq_len, n = block->tokens.size() > T ? (block->tokens.size() - 1) / T : 0;
  if (c_.shuffle) {  // keyed by the unit's epoch and place, so a prelude keeps the saved run's order
    const Source source = source_at(position_.epoch, position_.block);
    data::shuffled_indices(c_.seed ^ kWindowSalt, source.epoch * 0x9E3779B97F4A7C15ull + source.slot, n, block->order);
  } else {
    block->order.resize(n);
    for (uint64_t i = 0; i < n; ++i) block->order[i] = i;
  }
  if (position_.window > n)
    throw bad_input("the saved data position points at window " + std::to_string(position_.window) + " of a block of " +
                    std::to_string(n) + "; the data changed since the checkpoint");
  block_ = std::move(block);
  prefetch_next();
}

void DocumentStream::advance_block() {
  const uint64_t T = c_.seq_len, n = block_->order.size();
  position_.carry.assign(block_->tokens.begin() + std::ptrdiff_t(n * T), block_->tokens.end());
  block_.reset();
  position_.window = 0;
  std::tie(position_.epoch, position_.block) = first_block_from(position_.epoch, position_.block + 1);
  enter_block();
}

void DocumentStream::next(std::vector<int64_t>& window) {
  // A whole epoch of blocks without a window means this rank's data is shorter than one.
  for (uint64_t empty = 0; !block_ || position_.window == block_->order.size(); ++empty) {
    if (empty > units_on_this_rank(position_.epoch) + 1)
      throw bad_input("rank " + std::to_string(c_.rank) + "'s share of the data holds fewer than seq_len + 1 = " +
                      std::to_string(c_.seq_len + 1) + " tokens; lower seq_len or add data");
    if (block_) advance_block();
    build_block();
  }
  const uint64_t start = block_->order[position_.window++] * c_.seq_len;
  window.assign(block_->tokens.begin() + std::ptrdiff_t(start), block_->tokens.begin() + std::ptrdiff_t(start + c_.seq_len + 1));
}

void DocumentStream::seek(StreamPosition p, std::vector<StreamPosition> saved) {
  std::unique_ptr<Prelude> prelude = deal(saved);  // checked before anything changes
  if (prelude && p.epoch != prelude->epoch)
    throw bad_input("the saved data position is in epoch " + std::to_string(p.epoch) + ", outside the epoch " +
                    std::to_string(prelude->epoch) + " its saved ranks' positions deal; it is damaged");
  const uint64_t blocks = units_on_this_rank(p.epoch, prelude.get());
  if (p.block >= blocks)
    throw bad_input("the saved data position points at block " + std::to_string(p.block) + " of " + std::to_string(blocks) +
                    " on this rank; the data changed since the checkpoint");
  if (p.carry.size() > c_.seq_len) throw bad_input("the saved data position carries more than seq_len tokens; it is damaged");
  move_to(std::move(p), std::move(prelude), std::move(saved));
  build_block();
}

void DocumentStream::resume_from(std::vector<StreamPosition> saved) {
  std::unique_ptr<Prelude> prelude = deal(saved);
  if (!prelude) throw bad_input("no saved positions to resume from");
  const uint64_t epoch = prelude->epoch;
  move_to({}, std::move(prelude), std::move(saved));
  std::tie(position_.epoch, position_.block) = first_block_from(epoch, 0);
  enter_block();
  build_block();
}

}  // namespace loom::parquet_data
