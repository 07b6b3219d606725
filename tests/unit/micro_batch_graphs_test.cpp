// run.cuda_graph's set-up decision (train/micro_batch_graphs.hpp): which runs capture their
// micro-batches, and the reason each other run is given. The capture itself runs only on a GPU
// (tests/gpu/gpu_test.cpp).
#include "torch_doctest.hpp"  // before any torch or doctest header

#include "train/micro_batch_graphs.hpp"

using loom::MicroBatchGraphs;

TEST_CASE("run.cuda_graph captures one CUDA process without sparse tables, and says why not otherwise") {
  CHECK(MicroBatchGraphs::refusal(at::Device(at::kCPU), 1, false) == "it has no effect on the CPU");
  CHECK(MicroBatchGraphs::refusal(at::Device(at::kCPU), 4, true) == "it has no effect on the CPU");
  const at::Device gpu(at::kCUDA, 0);
  if (!MicroBatchGraphs::refusal(gpu, 1, false).empty()) {  // the sanitizer and fuzzing builds
    CHECK(MicroBatchGraphs::refusal(gpu, 1, false) == "this host was built without the CUDA toolkit (LOOM_WITH_CUDA unset)");
    return;
  }
  CHECK(MicroBatchGraphs::refusal(gpu, 2, false) ==
        "it captures runs of one process, and this one has 2 (their all-reduce, gathers and sends run between a "
        "micro-batch's passes)");
  CHECK(MicroBatchGraphs::refusal(gpu, 1, true) ==
        "the model's sparse embedding tables collect the rows they touched on the host");
}
