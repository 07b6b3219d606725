// train/mapped_cuda_memory.hpp's granule arithmetic, which decides what shard = "parameters"
// unmaps on a GPU: only granules wholly inside a released range (a neighbour's bytes are never
// lost), and every granule an acquired range touches (nothing it holds stays unmapped). The
// driver's side runs in gpu_tests.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include "train/mapped_cuda_memory.hpp"

using loom::granules_inside;
using loom::granules_touching;

TEST_CASE("mapped CUDA memory: a release takes whole granules inside the range, an acquire every one it touches") {
  const int64_t g = 2 << 20;  // the driver's 2 MiB
  // Aligned: the same granules both ways.
  CHECK(granules_inside(0, 4 * g, g).first == 0);
  CHECK(granules_inside(0, 4 * g, g).last == 4);
  CHECK(granules_touching(0, 4 * g, g).last == 4);
  // Unaligned ends: the partial granules at both ends stay mapped on release, are mapped on acquire.
  const loom::GranuleSpan inside = granules_inside(g + 10, 5 * g - 10, g), touching = granules_touching(g + 10, 5 * g - 10, g);
  CHECK(inside.first == 2);
  CHECK(inside.last == 4);
  CHECK(touching.first == 1);
  CHECK(touching.last == 5);
  // Within one granule: nothing to release, that granule to acquire.
  CHECK(granules_inside(g + 1, 2 * g - 1, g).count() == 0);
  CHECK(granules_touching(g + 1, 2 * g - 1, g).count() == 1);
  // Empty ranges: nothing either way.
  CHECK(granules_inside(3 * g, 3 * g, g).count() == 0);
  CHECK(granules_touching(3 * g, 3 * g, g).count() == 0);
  // Two neighbouring ranges that split a granule: neither release takes it, both acquires map it.
  const int64_t cut = 3 * g + g / 2;
  CHECK(granules_inside(0, cut, g).last == 3);
  CHECK(granules_inside(cut, 6 * g, g).first == 4);
  CHECK(granules_touching(0, cut, g).last == 4);
  CHECK(granules_touching(cut, 6 * g, g).first == 3);
  // Every granule wholly inside a range is also one it touches.
  for (int64_t b = 0; b < 3 * g; b += g / 3)
    for (int64_t e = b; e < 6 * g; e += g / 5) {
      const loom::GranuleSpan in = granules_inside(b, e, g), on = granules_touching(b, e, g);
      CHECK(in.count() <= on.count());
      if (in.count() > 0) CHECK((on.first <= in.first && in.last <= on.last));
    }
}

TEST_CASE("mapped CUDA memory: outside such a buffer, release and acquire leave a tensor alone") {
  const at::Tensor cpu = at::ones({1000});
  CHECK_FALSE(loom::release_mapped(cpu));
  CHECK_FALSE(loom::acquire_mapped(cpu));
  CHECK(cpu.sum().item<double>() == 1000.0);
}
