// profiler.cpp: the `profiler` hook. It records LibTorch's autograd profiler over the steps
// [start_step, end_step] (1-based, inclusive) and writes a Chrome trace JSON (a top-level array
// of complete "X" events, one per op: aten::addmm, aten::mm, autograd nodes, ...) that
// chrome://tracing and https://ui.perfetto.dev open.
//
// What it covers: everything the training thread runs from this hook's STEP_BEGIN of start_step
// to its STEP_END of end_step: forward, backward, clipping, the optimizer update, and any
// evaluation run after a profiled step before end_step. Other threads (the data prefetcher) are
// not recorded. On CUDA it records the CPU side of each op (its launch), not GPU kernel time.
// A run that resumes inside the window profiles from the resumed step on; a run that ends
// inside it writes what it recorded.
//
// It uses the legacy profiler's RecordProfile (torch/csrc/autograd/profiler_legacy.h): same
// header, class and constructors in LibTorch 1.13 and 2.x, and no dependency on Kineto, which
// CPU builds such as Debian's may lack. With world_size > 1 every rank writes its own file,
// `.rank<N>` inserted before the extension.
#include <loom/hook.hpp>
#include <loom/torch.hpp>

#include <torch/csrc/autograd/profiler_legacy.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

namespace fs = std::filesystem;

namespace {

class Profiler final : public loom::Hook {
 public:
  static constexpr const char* name = "profiler";
  static constexpr const char* summary = "Writes a Chrome trace of LibTorch's autograd profiler over steps [start_step, end_step].";
  static constexpr loom_option_spec options[] = {
      loom::option("start_step", LOOM_OPTION_TYPE_INT, "5", "First step profiled (1-based; skip warm-up steps)."),
      loom::option("end_step", LOOM_OPTION_TYPE_INT, "10", "Last step profiled (inclusive, >= start_step)."),
      loom::option("path", LOOM_OPTION_TYPE_STRING, "trace.json",
                   "Chrome trace JSON to write; relative paths are inside the run directory."),
  };

  Profiler(const loom::Config& c, const loom::Context& ctx)
      : start_(c.i64("start_step")), end_(c.i64("end_step")), total_steps_(ctx.total_steps) {
    if (start_ < 1) throw loom::Error("profiler: start_step must be >= 1, got " + std::to_string(start_));
    if (end_ < start_)
      throw loom::Error("profiler: end_step (" + std::to_string(end_) + ") must be >= start_step (" +
                        std::to_string(start_) + ")");
    fs::path path = c.str("path");
    if (path.empty()) throw loom::Error("profiler: path must name a file, such as \"trace.json\"");
    if (path.is_relative()) path = fs::path(ctx.run_dir) / path;
    if (ctx.world_size > 1)
      path.replace_filename(path.stem().string() + ".rank" + std::to_string(ctx.rank) + path.extension().string());
    path_ = path;
  }

  ~Profiler() override {
    try {
      stop();
    } catch (...) {  // never throw from a destructor; the run is ending anyway
    }
  }

  bool reads_step_values() const override { return false; }  // timings, never the loss

  void on_event(loom_event event, const loom_state_view& s, loom_control&) override {
    switch (event) {
      case LOOM_EVENT_TRAIN_BEGIN:
        if (total_steps_ > 0 && start_ > total_steps_)
          loom::log(LOOM_LOG_LEVEL_WARN, name,
                    "start_step " + std::to_string(start_) + " lies beyond run.steps = " +
                        std::to_string(total_steps_) + ": nothing will be profiled");
        break;
      case LOOM_EVENT_STEP_BEGIN: {
        const int64_t step = s.step + 1;  // the step about to run
        // The first step inside the window: normally start_step, later after a resume.
        if (!done_ && !recording_ && step >= start_ && step <= end_) start(step);
        break;
      }
      case LOOM_EVENT_STEP_END:
        if (!recording_) break;
        last_ = s.step;  // at STEP_END s.step counts the step that just ended
        if (last_ >= end_) stop();
        break;
      case LOOM_EVENT_TRAIN_END:
      case LOOM_EVENT_EXCEPTION:
        stop();
        break;
      default:
        break;
    }
  }

 private:
  void start(int64_t step) {
    fs::create_directories(path_.parent_path());
    tmp_ = path_;
    tmp_ += ".tmp";
    file_.emplace(tmp_, std::ios::out | std::ios::trunc);
    if (!*file_) throw loom::Error("profiler: cannot write " + tmp_.string(), LOOM_STATUS_CODE_NOT_FOUND);
    try {
      record_ = std::make_unique<torch::autograd::profiler::RecordProfile>(*file_);
    } catch (const std::exception& e) {
      file_.reset();
      fs::remove(tmp_);
      throw loom::Error(std::string("profiler: cannot start LibTorch's profiler (is another one running?): ") +
                        e.what(), LOOM_STATUS_CODE_INTERNAL);
    }
    first_ = step;
    last_ = step - 1;
    recording_ = true;
  }

  // Ends the recording (if any) and writes the trace: RecordProfile writes it when destroyed.
  void stop() {
    if (!recording_) return;
    recording_ = false;
    done_ = true;
    record_.reset();
    file_->close();
    const bool ok = !file_->fail();
    file_.reset();
    if (!ok) throw loom::Error("profiler: writing " + tmp_.string() + " failed (disk full?)", LOOM_STATUS_CODE_INTERNAL);
    fs::rename(tmp_, path_);
    const std::string steps = last_ < first_ ? "part of step " + std::to_string(first_)
                              : last_ == first_ ? "step " + std::to_string(first_)
                                                : "steps " + std::to_string(first_) + "-" + std::to_string(last_);
    loom::log(LOOM_LOG_LEVEL_INFO, name,
              "wrote the trace of " + steps + " to " + path_.string() + " (open it in chrome://tracing or ui.perfetto.dev)");
  }

  int64_t start_, end_, total_steps_;
  fs::path path_, tmp_;
  std::optional<std::ofstream> file_;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> record_;  // destroyed before file_ closes
  bool recording_ = false, done_ = false;
  int64_t first_ = 0, last_ = 0;  // first step recorded; last step completed while recording
};

}  // namespace

LOOM_PLUGIN("profiler", "0.1.0", loom::component<Profiler>())
