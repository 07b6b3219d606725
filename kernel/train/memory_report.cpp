#include "train/memory_report.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace loom {
namespace {

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

std::string cap_note(double cap_gib) { return cap_gib > 0 ? fmt::format(" (run.gpu_memory_gib = {:g})", cap_gib) : ""; }

// What to change, then LibTorch's first line: the end of both lines.
std::string fixes(const std::string& first, double cap_gib, bool offloaded, const std::string& cause) {
  std::string out = ". " + first + "shard the state ([distributed] shard), ";
  if (!offloaded) out += "move the optimizer to host memory ([distributed] offload = \"optimizer\"), ";
  out += "or ";
  out += cap_gib > 0 ? "raise run.gpu_memory_gib" : "use a larger device";
  return out + " (LibTorch: " + cause.substr(0, cause.find('\n')) + ")";
}

}  // namespace

bool is_device_out_of_memory(const std::string& message) {
  return message.find("CUDA out of memory") != std::string::npos;
}

std::string out_of_memory_line(const std::string& device, int64_t step, double cap_gib, const HeldBytes& held,
                               int64_t peak_bytes, const std::string& cause) {
  std::string out = fmt::format("CUDA ran out of memory on {} during step {}{}: held between steps: parameters {:.2f} "
                                "GiB, gradients {:.2f} GiB, optimizer state {:.2f} GiB",
                                device, step, cap_note(cap_gib),
                                gib(held.parameters), gib(held.gradients), gib(held.optimizer_state));
  if (held.frozen > 0) out += fmt::format(", frozen weights {:.2f} GiB", gib(held.frozen));
  if (held.offloaded > 0) out += fmt::format(" (and in host memory the offloaded optimizer, {:.2f} GiB)", gib(held.offloaded));
  if (peak_bytes > 0)
    out += fmt::format("; the allocator's peak was {:.2f} GiB, so the step's activations and workspace took about "
                       "{:.2f} GiB more",
                       gib(peak_bytes), gib(std::max<int64_t>(peak_bytes - held.total(), 0)));
  return out + fixes("Lower data.batch_size or the sequence length, set [model] activation_checkpointing, ", cap_gib,
                     held.offloaded > 0, cause);
}

std::string setup_out_of_memory_line(const std::string& device, double cap_gib, int64_t peak_bytes, bool offloaded,
                                     const std::string& cause) {
  std::string out = fmt::format("CUDA ran out of memory on {} while the run was set up (the model, its weights and "
                                "gradients, the optimizer's state){}",
                                device, cap_note(cap_gib));
  if (peak_bytes > 0) out += fmt::format(": the allocator's peak was {:.2f} GiB", gib(peak_bytes));
  return out + fixes("Train fewer parameters ([lora], [model] freeze with frozen_dtype = \"bf16\"), ", cap_gib, offloaded,
                     cause);
}

}  // namespace loom
