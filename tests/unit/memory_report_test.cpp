// The line a run stops with when a CUDA allocation fails (train/memory_report.hpp): LibTorch's
// own out-of-memory error is recognised, by type's words and through a plugin's status, and the
// line names what the rank held, what the step added, the cap and what to change.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include <c10/util/Exception.h>

#include <string>

#include "train/memory_report.hpp"

using namespace loom;

TEST_CASE("a CUDA allocation that failed is recognised by LibTorch's words, also inside a plugin's message") {
  // What c10::OutOfMemoryError carries (the caching allocator's text, PyTorch 2.x).
  const c10::OutOfMemoryError oom(c10::SourceLocation{"f", "file.cpp", 1},
                                  "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.1 GiB");
  CHECK(is_device_out_of_memory(oom.what_without_backtrace()));
  CHECK(is_device_out_of_memory("[model] llama (/x/llama.so): forward failed: CUDA out of memory. Tried to allocate 1 GiB"));
  CHECK_FALSE(is_device_out_of_memory("LibTorch error: shape mismatch"));
  CHECK_FALSE(is_device_out_of_memory(""));
}

TEST_CASE("the out-of-memory line names what the rank held, the step's share, the cap and the fixes") {
  const int64_t gib = int64_t{1} << 30;
  const HeldBytes held{2 * gib, 2 * gib, 4 * gib, gib / 2};
  const std::string line = out_of_memory_line("cuda:0", 12, 40, held, 39 * gib,
                                              "CUDA out of memory. Tried to allocate 2.00 GiB.\nmore detail");
  CAPTURE(line);
  CHECK(line.rfind("CUDA ran out of memory on cuda:0 during step 12 (run.gpu_memory_gib = 40): ", 0) == 0);
  CHECK(line.find("parameters 2.00 GiB, gradients 2.00 GiB, optimizer state 4.00 GiB, frozen weights 0.50 GiB") !=
        std::string::npos);
  CHECK(line.find("the allocator's peak was 39.00 GiB, so the step's activations and workspace took about 30.50 GiB") !=
        std::string::npos);
  CHECK(line.find("raise run.gpu_memory_gib") != std::string::npos);
  CHECK(line.find("move the optimizer to host memory ([distributed] offload = \"optimizer\")") != std::string::npos);
  CHECK(line.find("(LibTorch: CUDA out of memory. Tried to allocate 2.00 GiB.)") != std::string::npos);
  CHECK(line.find("more detail") == std::string::npos);  // one line
  // No cap, no frozen weights, the peak unknown: none of them named.
  const std::string bare = out_of_memory_line("cuda:1", 1, 0, {gib, gib, 2 * gib, 0}, -1, "CUDA out of memory.");
  CAPTURE(bare);
  CHECK(bare.find("gpu_memory_gib =") == std::string::npos);
  CHECK(bare.find("frozen") == std::string::npos);
  CHECK(bare.find("peak") == std::string::npos);
  CHECK(bare.find("use a larger device") != std::string::npos);
  // Offloaded: the host's share is named, and offloading is not suggested again.
  const std::string offloaded = out_of_memory_line("cuda:0", 3, 0, {gib, gib, 0, 0, 3 * gib}, -1, "CUDA out of memory.");
  CAPTURE(offloaded);
  CHECK(offloaded.find("optimizer state 0.00 GiB (and in host memory the offloaded optimizer, 3.00 GiB)") != std::string::npos);
  CHECK(offloaded.find("offload = ") == std::string::npos);
}

TEST_CASE("running out while the run is set up: one line with the allocator's peak and the fixes") {
  const int64_t gib = int64_t{1} << 30;
  const std::string line = setup_out_of_memory_line("cuda:0", 40, 39 * gib, false,
                                                    "CUDA out of memory. Tried to allocate 12.00 GiB.\nmore");
  CAPTURE(line);
  CHECK(line.rfind("CUDA ran out of memory on cuda:0 while the run was set up (the model, its weights and gradients, "
                   "the optimizer's state) (run.gpu_memory_gib = 40): the allocator's peak was 39.00 GiB. ", 0) == 0);
  CHECK(line.find("move the optimizer to host memory ([distributed] offload = \"optimizer\")") != std::string::npos);
  CHECK(line.find("[lora]") != std::string::npos);
  CHECK(line.find("raise run.gpu_memory_gib (LibTorch: CUDA out of memory. Tried to allocate 12.00 GiB.)") !=
        std::string::npos);
  CHECK(line.find("more") == std::string::npos);
  const std::string offloaded = setup_out_of_memory_line("cuda:1", 0, -1, true, "CUDA out of memory.");
  CAPTURE(offloaded);
  CHECK(offloaded.find("peak") == std::string::npos);
  CHECK(offloaded.find("offload =") == std::string::npos);
  CHECK(offloaded.find("use a larger device") != std::string::npos);
}
