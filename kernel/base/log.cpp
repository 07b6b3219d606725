#include "base/log.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>

namespace loom {
namespace {

class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  StderrSink() : tty_(isatty(fileno(stderr)) != 0) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t text;
    formatter_->format(msg, text);
    if (tty_) std::fputs("\r\033[K", stderr);  // erase a half-drawn progress line first
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  }
  void flush_() override { std::fflush(stderr); }

 private:
  bool tty_;
};

// What a rank logs before it joins the run folder: a few dozen lines at most.
constexpr size_t kLinesBeforeJoining = 512;

std::string pattern(int rank, int world_size) {
  return (world_size > 1 ? "[rank " + std::to_string(rank) + "] " : std::string()) + "%l: %v";
}

}  // namespace

void log_setup(int rank, int world_size, bool verbose) {
  auto stderr_sink = std::make_shared<StderrSink>();
  auto logger = std::make_shared<spdlog::logger>("loom", stderr_sink);
  logger->set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  if (world_size > 1) {
    // Rank 0 speaks for the run on the terminal; the others show only warnings and errors there
    // (prefixed with their rank) and keep everything in their own log file. Until the rank
    // joins the run folder, its lines wait in memory.
    if (rank != 0) stderr_sink->set_level(spdlog::level::warn);
    logger->sinks().push_back(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(kLinesBeforeJoining));
  }
  logger->set_pattern(pattern(rank, world_size));  // for every sink, so after they are all in
  spdlog::set_default_logger(logger);
}

void log_join_run(int rank, int world_size, const std::string& file) {
  auto logger = spdlog::default_logger();
  auto& sinks = logger->sinks();
  for (auto it = sinks.begin(); it != sinks.end(); ++it) {
    auto waiting = std::dynamic_pointer_cast<spdlog::sinks::ringbuffer_sink_mt>(*it);
    if (!waiting) continue;
    std::ofstream earlier(file, std::ios::app);
    for (const std::string& line : waiting->last_formatted()) earlier << line;
    sinks.erase(it);
    break;
  }
  sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(file));
  logger->set_pattern(pattern(rank, world_size));
  logger->flush_on(spdlog::level::info);  // a rank that dies still leaves its last lines
}

}  // namespace loom
