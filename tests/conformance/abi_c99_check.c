/* abi_c99_check.c: building this file IS the test. It includes the whole plugin ABI and is
 * compiled as ISO C99 with -pedantic-errors -Wall -Wextra -Werror (see CMakeLists.txt, which
 * also runs the same compile as the ctest entry conformance_abi_c99). Rule 6 promises that a
 * plugin can be written in plain C; any C++-ism, GNU extension or warning in the headers
 * fails it. */
#include <loom/abi.h>

/* Touch each kind's vtable type so the compiler checks more than the declarations. */
size_t loom_abi_c99_check(void);
size_t loom_abi_c99_check(void) {
  loom_model_vtable model = {0};
  loom_dataset_vtable dataset = {0};
  loom_optimizer_vtable optimizer = {0};
  loom_schedule_vtable schedule = {0};
  loom_checkpoint_vtable checkpoint = {0};
  loom_tracker_vtable tracker = {0};
  loom_hook_vtable hook = {0};
  tracker.struct_size = sizeof tracker;
  return model.struct_size + dataset.struct_size + optimizer.struct_size + schedule.struct_size +
         checkpoint.struct_size + (LOOM_STRUCT_HAS(&tracker, loom_tracker_vtable, note) ? 1u : 0u) +
         hook.struct_size;
}
