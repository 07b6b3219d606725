/* loom/dataset.h: the dataset kind (torch-free). Batches cross as DLPack tensors.
 *
 *   static const loom_dataset_vtable vt = { sizeof(loom_dataset_vtable), my_create,
 *                                           my_destroy, my_next };
 *   Most authors derive from loom::Dataset in <loom/dataset.hpp> instead.
 */
#ifndef LOOM_DATASET_H
#define LOOM_DATASET_H
#include <dlpack/dlpack.h>
#include "core.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_dataset loom_dataset; /* plugin-defined */

typedef struct loom_batch {
  size_t struct_size;       /* set by the host */
  DLManagedTensor* inputs;  /* out; int64 [B, T] on CPU; the host takes ownership and calls
                               its deleter */
  DLManagedTensor* targets; /* out; int64 [B, T] on CPU; same ownership; LOOM_IGNORE_INDEX
                               marks positions without loss */
} loom_batch;

typedef struct loom_dataset_vtable {
  size_t struct_size;
  /* Required. The context carries rank and world size: shard without overlap. */
  loom_status* (*create)(const loom_context* context, const loom_config* config,
                         loom_dataset** out);       /* out: destroy with destroy */
  void (*destroy)(loom_dataset* dataset);           /* accepts NULL */
  /* Called from one host thread at a time, in order; deterministic given the seed. */
  loom_status* (*next)(loom_dataset* dataset, loom_batch* out);
  /* Optional: exact position for resume. */
  loom_status* (*state_save)(loom_dataset* dataset, const loom_byte_writer* writer);
  loom_status* (*state_load)(loom_dataset* dataset, const void* data, size_t size); /* borrowed */
} loom_dataset_vtable;

LOOM_ABI_OFFSET(loom_batch, targets, 2);
LOOM_ABI_OFFSET(loom_dataset_vtable, next, 3);
LOOM_ABI_OFFSET(loom_dataset_vtable, state_load, 5);

#ifdef __cplusplus
}
#endif
#endif
