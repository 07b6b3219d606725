// memory_monitor.cpp: the `memory_monitor` hook. Every `every` steps, and once more when the
// run ends (run.steps reached or stopped early) on a step not yet sampled, it samples this process's memory and
//   - logs one INFO line through the host's logger (rank 0 only, unless all_ranks), and
//   - appends one JSON object per line to <run_dir>/<path> (default memory.jsonl), e.g.
//       {"step":100,"rank":0,"rss_bytes":512000000,"peak_rss_bytes":530000000}
//     with, on a CUDA device, cuda_allocated_bytes, cuda_reserved_bytes,
//     cuda_peak_allocated_bytes and cuda_peak_reserved_bytes (the CUDA caching allocator's
//     statistics for the run's device). With world_size > 1 each rank writes its own file,
//     `.rank<N>` inserted before the extension.
//
// Why not tracker metrics: the hook ABI gives hooks no way to hand metrics to trackers, so the
// numbers go to the log and to their own file. On resume, lines for steps after the resumed
// step (written by the interrupted run) are dropped, so steps never repeat or go back.
//
// Sources: current RSS from /proc/self/statm (resident pages), peak RSS from
// getrusage(RUSAGE_SELF).ru_maxrss (KiB on Linux; never reported below the current RSS, which
// ru_maxrss can briefly trail). CUDA statistics need libc10_cuda, so they are compiled in
// only when CMake found a CUDA LibTorch (LOOM_MEMORY_MONITOR_CUDA; then this plugin links
// LibTorch and carries its fingerprint) and read only when the run's device starts with "cuda".
// On CPU-only LibTorch (Debian's) the plugin is torch-free. A header test such as
// __has_include(<c10/cuda/CUDACachingAllocator.h>) would not do: Debian ships those headers
// without the library.
#include <loom/hook.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#if defined(LOOM_MEMORY_MONITOR_CUDA)
#include <loom/torch.hpp>

#include <c10/core/Device.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace fs = std::filesystem;

namespace {

struct Sample {
  int64_t rss = 0, peak_rss = 0;  // bytes
  bool cuda = false;
  int64_t allocated = 0, reserved = 0, peak_allocated = 0, peak_reserved = 0;  // bytes, when cuda
};

int64_t current_rss() {
  std::ifstream statm("/proc/self/statm");
  long long size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return static_cast<int64_t>(resident) * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

int64_t peak_rss() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

class MemoryMonitor final : public loom::Hook {
 public:
  static constexpr const char* name = "memory_monitor";
  static constexpr const char* summary = "Logs peak/current RSS and CUDA allocator memory every N steps, and writes them to memory.jsonl.";
  static constexpr loom_option_spec options[] = {
      loom::option("every", LOOM_OPTION_TYPE_INT, "100", "Sample after every this many steps (> 0), and at the end."),
      loom::option("log", LOOM_OPTION_TYPE_BOOL, "true", "Log each sample as an INFO line."),
      loom::option("all_ranks", LOOM_OPTION_TYPE_BOOL, "false", "Log on every rank, not only rank 0 (files are per rank anyway)."),
      loom::option("path", LOOM_OPTION_TYPE_STRING, "memory.jsonl",
                   "JSON-lines file, relative to the run directory; \"\" writes none."),
  };

  MemoryMonitor(const loom::Config& c, const loom::Context& ctx)
      : every_(c.i64("every")),
        log_(c.flag("log") && (ctx.rank == 0 || c.flag("all_ranks"))),
        rank_(ctx.rank),
        device_(ctx.device) {
    if (every_ <= 0) throw loom::Error("memory_monitor: every must be > 0, got " + std::to_string(every_));
    const std::string path = c.str("path");
    if (!path.empty()) {
      path_ = fs::path(path).is_relative() ? fs::path(ctx.run_dir) / path : fs::path(path);
      if (ctx.world_size > 1)
        path_.replace_filename(path_.stem().string() + ".rank" + std::to_string(ctx.rank) + path_.extension().string());
    }
  }

  bool reads_step_values() const override { return false; }  // memory, never the loss

  void on_event(loom_event event, const loom_state_view& s, loom_control&) override {
    if (event == LOOM_EVENT_TRAIN_BEGIN) {
      last_ = s.step;
      open(s.step);
    } else if (event == LOOM_EVENT_STEP_END) {
      // At STEP_END s.step counts the step that just ended.
      if (s.step % every_ == 0 || s.step == s.total_steps) record(s.step);
    } else if (event == LOOM_EVENT_TRAIN_END) {
      if (s.step > last_) record(s.step);
    }
  }

 private:
  // Opens the file for appending, first dropping lines for steps after `step` (the run resumed
  // there, or starts over at 0), so the file's steps stay strictly increasing.
  void open(int64_t step) {
    if (path_.empty()) return;
    fs::create_directories(path_.parent_path());
    if (fs::exists(path_)) {
      std::ifstream in(path_);
      std::vector<std::string> kept;
      for (std::string line; std::getline(in, line);) {
        long long line_step = 0;
        if (std::sscanf(line.c_str(), "{\"step\":%lld", &line_step) == 1 && line_step <= step) kept.push_back(line);
      }
      in.close();
      std::ofstream rewrite(path_, std::ios::trunc);
      for (const auto& line : kept) rewrite << line << '\n';
      if (!rewrite) throw loom::Error("memory_monitor: cannot rewrite " + path_.string());
    }
    out_.open(path_, std::ios::app);
    if (!out_) throw loom::Error("memory_monitor: cannot write " + path_.string(), LOOM_STATUS_CODE_NOT_FOUND);
  }

  void record(int64_t step) {
    last_ = step;
    const Sample m = sample();
    if (out_.is_open()) {
      std::ostringstream line;
      line << "{\"step\":" << step << ",\"rank\":" << rank_ << ",\"rss_bytes\":" << m.rss
           << ",\"peak_rss_bytes\":" << m.peak_rss;
      if (m.cuda)
        line << ",\"cuda_allocated_bytes\":" << m.allocated << ",\"cuda_reserved_bytes\":" << m.reserved
             << ",\"cuda_peak_allocated_bytes\":" << m.peak_allocated
             << ",\"cuda_peak_reserved_bytes\":" << m.peak_reserved;
      line << "}\n";
      out_ << line.str() << std::flush;
      if (!out_) {  // a full disk degrades to a warning: memory numbers are not worth a run
        loom::log(LOOM_LOG_LEVEL_WARN, name, "cannot append to " + path_.string() + "; no further samples written");
        out_.close();
      }
    }
    if (log_) {
      std::string text = "step " + std::to_string(step) + ": rss " + mib(m.rss) + " (peak " + mib(m.peak_rss) + ")";
      if (m.cuda)
        text += ", cuda allocated " + mib(m.allocated) + " (peak " + mib(m.peak_allocated) + "), reserved " +
                mib(m.reserved) + " (peak " + mib(m.peak_reserved) + ")";
      loom::log(LOOM_LOG_LEVEL_INFO, name, text);
    }
  }

  Sample sample() const {
    Sample m;
    m.rss = current_rss();
    // The kernel updates ru_maxrss lazily (on page-table teardown, not on every fault), so it
    // can trail the current RSS read a moment later: the peak is at least what we see now.
    m.peak_rss = std::max(peak_rss(), m.rss);
#if defined(LOOM_MEMORY_MONITOR_CUDA)
    if (device_.rfind("cuda", 0) == 0) {
      const c10::Device device(device_);
      const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
      const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
      // Index 0 is StatType::AGGREGATE (all pool types) in every LibTorch version.
      const auto& allocated = stats.allocated_bytes[0];
      const auto& reserved = stats.reserved_bytes[0];
      m.cuda = true;
      m.allocated = allocated.current;
      m.peak_allocated = allocated.peak;
      m.reserved = reserved.current;
      m.peak_reserved = reserved.peak;
    }
#endif
    return m;
  }

  int64_t every_;
  bool log_;
  int32_t rank_;
  std::string device_;
  fs::path path_;      // empty: no file
  std::ofstream out_;  // open from TRAIN_BEGIN while the file is writable
  int64_t last_ = 0;   // last step sampled (or the step the run began at)
};

}  // namespace

LOOM_PLUGIN("memory_monitor", "0.1.0", loom::component<MemoryMonitor>())
