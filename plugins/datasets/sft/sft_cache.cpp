// sft_cache.cpp: see sft_cache.hpp.
#include "sft_cache.hpp"

#include "sft_tables.hpp"

#include <xxhash.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "formats/files.hpp"

namespace loom::sft {

namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'S', 'F', 'T', '1'};
constexpr uint32_t kVersion = 2;  // 2: a checksum closes the file
constexpr size_t kCounts = 7;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 * kCounts;

struct Line {
  std::string text, where;
};

std::vector<Line> read_lines(const std::vector<std::string>& files) {
  std::vector<Line> lines;
  for (const auto& file : files) {
    if (is_table_file(file)) {  // Parquet or Arrow: each row as its JSON object (sft_tables.hpp)
      for_each_table_row(file, [&](std::string json, std::string where) { lines.push_back({std::move(json), std::move(where)}); });
      continue;
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::invalid_argument(file + ": cannot open; check [data] files");
    std::string text;
    for (uint64_t n = 1; std::getline(in, text); ++n)
      if (text.find_first_not_of(" \t\r") != std::string::npos) lines.push_back({std::move(text), file + " line " + std::to_string(n)});
    if (in.bad()) throw std::runtime_error(file + ": read error");
  }
  return lines;
}

std::vector<Sample> encode_all(const std::vector<Line>& lines, const BuildInputs& in, DataStats& stats,
                               std::vector<std::string>& bad, const LogFn& log) {
  std::vector<Sample> samples(lines.size());
  std::vector<std::string> errors(lines.size());
  std::atomic<size_t> next{0}, done{0};
  auto work = [&] {
    for (size_t i = next++; i < lines.size(); i = next++) {
      try {
        samples[i] = encode_record(parse_record(lines[i].text, in.format, lines[i].where), *in.tokenizer, in.render, in.encode);
      } catch (const BadLine& e) {  // parse errors name the line already; template refusals do not
        const std::string what = e.what();
        errors[i] = what.compare(0, lines[i].where.size(), lines[i].where) == 0 ? what : lines[i].where + ": " + what;
      } catch (const std::exception& e) {  // a tokenizer limit, a template error: still this line's fault
        errors[i] = lines[i].where + ": " + e.what();
      }
      ++done;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < in.threads; ++t) pool.emplace_back(work);
  std::thread progress([&] {
    size_t reported = 0;
    while (done < lines.size()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const size_t tenth = done * 10 / std::max<size_t>(1, lines.size());
      if (tenth > reported && tenth < 10) {
        reported = tenth;
        log("tokenizing: " + std::to_string(done) + "/" + std::to_string(lines.size()) + " samples (" +
            std::to_string(tenth * 10) + "%)");
      }
    }
  });
  work();
  for (auto& thread : pool) thread.join();
  progress.join();
  stats.lines = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (errors[i].empty()) continue;
    ++stats.bad_lines;
    if (!in.skip_bad_lines) throw std::invalid_argument(errors[i] + " (on_bad_line = \"skip\" skips such lines)");
    if (bad.size() < 3) bad.push_back(errors[i]);
  }
  return samples;
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}
uint32_t get_u32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// XXH64 of everything before the checksum: the header, the ids (little-endian) and the flags.
uint64_t payload_checksum(const std::string& head, const TokenizedData& data) {
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  XXH64_update(state, head.data(), head.size());
  std::string ids;
  ids.reserve(4 * data.ids.size());
  for (int32_t id : data.ids)
    for (int i = 0; i < 4; ++i) ids += static_cast<char>((static_cast<uint32_t>(id) >> (8 * i)) & 0xFF);
  XXH64_update(state, ids.data(), ids.size());
  XXH64_update(state, data.trained.data(), data.trained.size());
  const uint64_t sum = XXH64_digest(state);
  XXH64_freeState(state);
  return sum;
}

void write_cache(const TokenizedData& data, const std::string& path) {
  std::string head(kMagic, 8);
  for (int i = 0; i < 4; ++i) head += static_cast<char>((kVersion >> (8 * i)) & 0xFF);
  head.append(4, '\0');
  const DataStats& s = data.stats;
  for (uint64_t v : {uint64_t(data.samples()), uint64_t(data.ids.size()), s.lines, s.bad_lines, s.too_long, s.no_trainable, s.truncated})
    put_u64(head, v);
  for (uint64_t o : data.offsets) put_u64(head, o);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    for (int32_t id : data.ids)
      for (int i = 0; i < 4; ++i) out.put(static_cast<char>((static_cast<uint32_t>(id) >> (8 * i)) & 0xFF));
    out.write(reinterpret_cast<const char*>(data.trained.data()), static_cast<std::streamsize>(data.trained.size()));
    std::string checksum;
    put_u64(checksum, payload_checksum(head, data));
    out.write(checksum.data(), 8);
    if (!out.flush()) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);  // a full disk leaves no partial file behind
      throw std::runtime_error(tmp + ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw std::runtime_error(path + ": cannot move the cache into place: " + ec.message());
  }
}

// The cache at `path`, or false when it is missing, not a regular file, or not whole: sizes,
// offsets, ids and flags in range and the checksum equal (a damaged cache is rebuilt).
bool read_cache(const std::string& path, TokenizedData& data) {
  if (!formats::is_regular_file(path)) return false;  // never opens a FIFO or a device
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < kHeaderBytes + 8 || std::memcmp(p, kMagic, 8) != 0 || get_u32(p + 8) != kVersion) return false;
  uint64_t counts[kCounts];
  for (size_t i = 0; i < kCounts; ++i) counts[i] = get_u64(p + 16 + 8 * i);
  const uint64_t samples = counts[0], tokens = counts[1];
  if (samples > bytes.size() / 8 || tokens > bytes.size() / 5) return false;
  if (bytes.size() != kHeaderBytes + 8 * (samples + 1) + 5 * tokens + 8) return false;
  data.offsets.resize(samples + 1);
  for (uint64_t i = 0; i <= samples; ++i) {
    data.offsets[i] = get_u64(p + kHeaderBytes + 8 * i);
    if (data.offsets[i] > tokens || (i > 0 && data.offsets[i] < data.offsets[i - 1] + 2)) return false;
  }
  if (data.offsets[0] != 0 || data.offsets[samples] != tokens) return false;
  const unsigned char* ids = p + kHeaderBytes + 8 * (samples + 1);
  data.ids.resize(tokens);
  for (uint64_t i = 0; i < tokens; ++i) {
    data.ids[i] = static_cast<int32_t>(get_u32(ids + 4 * i));
    if (data.ids[i] < 0) return false;
  }
  data.trained.assign(ids + 4 * tokens, ids + 5 * tokens);
  for (const uint8_t flag : data.trained)
    if (flag > 1) return false;
  data.stats = {counts[2], counts[3], counts[4], counts[5], counts[6]};
  const std::string head = bytes.substr(0, kHeaderBytes + 8 * (samples + 1));
  return get_u64(ids + 5 * tokens) == payload_checksum(head, data);
}

}  // namespace

std::string cache_key(const BuildInputs& in) {
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  auto add = [&](const std::string& part) {
    const uint64_t n = part.size();
    XXH64_update(state, &n, sizeof n);
    XXH64_update(state, part.data(), part.size());
  };
  add("loom-sft-cache-v1");
  add(in.tokenizer_identity);
  add(in.template_source);
  add(in.render ? "template" : "no template");
  for (const auto& s : {in.format.format, in.format.messages_field, in.format.prompt_field, in.format.completion_field,
                        in.format.text_field, in.encode.train_on, in.encode.truncation, std::to_string(in.encode.max_length),
                        std::string(in.skip_bad_lines ? "skip" : "error")})
    add(s);
  for (const auto& file : in.files) {  // streamed: a data file is never held whole for its hash
    add(file);
    std::ifstream f(file, std::ios::binary);
    std::vector<char> chunk(1 << 20);
    uint64_t bytes = 0;
    while (f.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || f.gcount() > 0) {
      XXH64_update(state, chunk.data(), static_cast<size_t>(f.gcount()));
      bytes += static_cast<uint64_t>(f.gcount());
    }
    XXH64_update(state, &bytes, sizeof bytes);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH64_digest(state)));
  XXH64_freeState(state);
  return hex;
}

TokenizedData load_or_build(const BuildInputs& in, const std::string& cache_dir, const LogFn& log) {
  const std::string path = cache_dir + "/" + cache_key(in) + ".sft";
  TokenizedData data;
  if (read_cache(path, data)) {
    log("tokenized samples from the cache " + path);
    return data;
  }
  data = TokenizedData();
  if (formats::path_exists(path)) log("the cache " + path + " is damaged or from another version; tokenizing again");
  const std::vector<Line> lines = read_lines(in.files);
  log("tokenizing " + std::to_string(lines.size()) + " samples on " + std::to_string(in.threads) + " thread(s)");
  std::vector<std::string> bad;
  const std::vector<Sample> samples = encode_all(lines, in, data.stats, bad, log);
  for (const auto& message : bad) log("skipped " + message);
  for (const Sample& s : samples) {
    if (s.ids.empty() && s.outcome == Sample::Outcome::kept) continue;  // a skipped bad line
    switch (s.outcome) {
      case Sample::Outcome::too_long: ++data.stats.too_long; continue;
      case Sample::Outcome::no_trainable: ++data.stats.no_trainable; continue;
      case Sample::Outcome::truncated: ++data.stats.truncated; break;
      case Sample::Outcome::kept: break;
    }
    data.ids.insert(data.ids.end(), s.ids.begin(), s.ids.end());
    data.trained.insert(data.trained.end(), s.trained.begin(), s.trained.end());
    data.offsets.push_back(data.ids.size());
  }
  if (data.samples() == 0) throw std::invalid_argument("no sample with a trainable token is left in [data] files");
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  if (ec) throw std::runtime_error(cache_dir + ": cannot create the tokenization cache folder: " + ec.message());
  write_cache(data, path);
  log("wrote the tokenization cache " + path);
  return data;
}

}  // namespace loom::sft
