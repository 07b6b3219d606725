/* loom/schedule.h: the learning-rate schedule kind (torch-free). A schedule maps a step to a
 * factor; the host multiplies the optimizer's "lr" option by it.
 *
 *   static const loom_schedule_vtable vt = { sizeof(loom_schedule_vtable), my_create,
 *                                            my_destroy, my_factor };
 */
#ifndef LOOM_SCHEDULE_H
#define LOOM_SCHEDULE_H
#include "core.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_schedule loom_schedule; /* plugin-defined */

typedef struct loom_schedule_vtable {
  size_t struct_size;
  /* Required */
  loom_status* (*create)(const loom_context* context, const loom_config* config,
                         loom_schedule** out);    /* out: destroy with destroy */
  void (*destroy)(loom_schedule* schedule);       /* accepts NULL */
  /* step is the 1-based optimizer step about to run; out: the lr factor, usually in [0, 1] */
  loom_status* (*factor)(loom_schedule* schedule, int64_t step, double* out);
} loom_schedule_vtable;

LOOM_ABI_OFFSET(loom_schedule_vtable, factor, 3);

#ifdef __cplusplus
}
#endif
#endif
