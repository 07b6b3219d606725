// profiler.cpp: the `profiler` hook. It records LibTorch's profiler over the steps
// [start_step, end_step] (1-based, inclusive) and writes a Chrome trace JSON that
// chrome://tracing and https://ui.perfetto.dev open.
//
// What it covers: everything the training thread runs from this hook's STEP_BEGIN of start_step
// to its STEP_END of end_step: forward, backward, clipping, the optimizer update, and any
// evaluation run after a profiled step before end_step. Other threads (the data prefetcher) are
// not recorded. A run that resumes inside the window profiles from the resumed step on; a run
// that ends inside it writes what it recorded.
//
// Two recorders (option `recorder`; "auto" takes Kineto on a GPU, the legacy one on the CPU):
//  - legacy: the legacy profiler's RecordProfile (torch/csrc/autograd/profiler_legacy.h), a
//    top-level array of complete "X" events, one per op (aten::addmm, autograd nodes, ...).
//  - kineto: Kineto (torch/csrc/autograd/profiler_kineto.h, what torch.profiler uses), CPU
//    activities plus, on a GPU, CUDA's: a {"traceEvents": [...]} object that also holds every GPU kernel
//    ("cat": "kernel") with its duration on the device, so a step's GPU time can be summed by
//    kernel (tools/bench/kernel_times.py does) and set beside PyTorch's own trace. On a GPU the
//    hook waits for the device when the window opens and before it closes: the host runs ahead
//    of the GPU, and without the waits the trace would hold the end of the step before the
//    window and miss the end of its last step (kernels that have not run are not recorded).
// With world_size > 1 every rank writes its own file, `.rank<N>` inserted before the extension.
#include <loom/hook.hpp>
#include <loom/torch.hpp>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
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
      loom::option("recorder", LOOM_OPTION_TYPE_STRING, "auto",
                   "\"kineto\" (torch.profiler's: ops, and on a GPU every kernel with its device time), \"legacy\" "
                   "(ops only, one array of events) or \"auto\" (kineto on a GPU, legacy on the CPU)."),
  };

  Profiler(const loom::Config& c, const loom::Context& ctx)
      : start_(c.i64("start_step")),
        end_(c.i64("end_step")),
        total_steps_(ctx.total_steps),
        gpu_(ctx.device.rfind("cuda", 0) == 0),
        device_(ctx.device) {
    const std::string recorder = c.str("recorder");
    if (recorder != "auto" && recorder != "kineto" && recorder != "legacy")
      throw loom::Error("profiler: recorder must be \"auto\", \"kineto\" or \"legacy\", got \"" + recorder + "\"");
    kineto_ = recorder == "kineto" || (recorder == "auto" && gpu_);
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
      wait_for_gpu();
      if (kineto_)
        start_kineto(gpu_);
      else
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
    wait_for_gpu();
    record_.reset();  // the legacy recorder writes its trace into file_ here
    file_->close();
    bool ok = !file_->fail();
    if (kineto_) {  // Kineto writes the file itself; the stream only reserved the name
      torch::autograd::profiler::disableProfiler()->save(tmp_.string());
      std::error_code size_error;
      ok = fs::file_size(tmp_, size_error) > 0 && !size_error;
    }
    file_.reset();
    if (!ok) throw loom::Error("profiler: writing " + tmp_.string() + " failed (disk full?)", LOOM_STATUS_CODE_INTERNAL);
    fs::rename(tmp_, path_);
    const std::string steps = last_ < first_ ? "part of step " + std::to_string(first_)
                              : last_ == first_ ? "step " + std::to_string(first_)
                                                : "steps " + std::to_string(first_) + "-" + std::to_string(last_);
    loom::log(LOOM_LOG_LEVEL_INFO, name,
              "wrote the trace of " + steps + " to " + path_.string() + " (open it in chrome://tracing or ui.perfetto.dev)");
  }

  // Blocks until the GPU has run everything queued so far (nothing on the CPU).
  void wait_for_gpu() const {
    if (!gpu_) return;
    const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    const c10::Device device(device_);
    impl->synchronizeDevice(device.has_index() ? device.index() : impl->getDevice().index());
  }

  // The ops the CPU ran and, on a GPU, every kernel the device ran.
  static void start_kineto(bool gpu) {
    namespace prof = torch::profiler::impl;
    const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
    std::set<prof::ActivityType> activities{prof::ActivityType::CPU};
    if (gpu) activities.insert(prof::ActivityType::CUDA);
    torch::autograd::profiler::prepareProfiler(config, activities);
    torch::autograd::profiler::enableProfiler(config, activities);
  }

  int64_t start_, end_, total_steps_;
  bool gpu_;             // the run's device is a GPU: record its kernels too
  std::string device_;   // "cuda" or "cuda:N" on a GPU
  bool kineto_ = false;  // Kineto, else the legacy recorder
  fs::path path_, tmp_;
  std::optional<std::ofstream> file_;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> record_;  // destroyed before file_ closes
  bool recording_ = false, done_ = false;
  int64_t first_ = 0, last_ = 0;  // first step recorded; last step completed while recording
};

}  // namespace

LOOM_PLUGIN("profiler", "0.1.0", loom::component<Profiler>())
