/* loom/checkpoint.h: the checkpoint-backend kind (torch-free). The host's checkpoint manager
 * decides when and where; a backend only turns named CPU tensors plus JSON metadata into files
 * inside a directory the manager gives it, and back.
 *
 *   static const loom_checkpoint_vtable vt = { sizeof(loom_checkpoint_vtable), my_create,
 *                                              my_destroy, my_save, my_load };
 */
#ifndef LOOM_CHECKPOINT_H
#define LOOM_CHECKPOINT_H
#include <dlpack/dlpack.h>
#include "core.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_checkpoint loom_checkpoint; /* plugin-defined */

typedef struct loom_named_tensor {
  size_t struct_size;
  const char* name;         /* borrowed for the call */
  const DLTensor* tensor;   /* borrowed for the call; CPU, contiguous */
} loom_named_tensor;

/* Receives what a load finds; borrowed for the load call. */
typedef struct loom_checkpoint_reader {
  size_t struct_size;
  void* user;
  /* name and tensor are borrowed for the call: the host copies them */
  loom_status* (*on_tensor)(void* user, const char* name, const DLTensor* tensor);
  loom_status* (*on_metadata)(void* user, const char* json); /* borrowed for the call */
} loom_checkpoint_reader;

typedef struct loom_checkpoint_vtable {
  size_t struct_size;
  /* Required */
  loom_status* (*create)(const loom_context* context, const loom_config* config,
                         loom_checkpoint** out);  /* out: destroy with destroy */
  void (*destroy)(loom_checkpoint* backend);      /* accepts NULL */
  /* Write into dir (exists, empty, borrowed). Files must be complete when this returns; the
     manager fsyncs, indexes and renames. */
  loom_status* (*save)(loom_checkpoint* backend, const char* dir,
                       const loom_named_tensor* const* tensors, size_t count,
                       const char* metadata_json);
  loom_status* (*load)(loom_checkpoint* backend, const char* dir,
                       const loom_checkpoint_reader* reader);
} loom_checkpoint_vtable;

LOOM_ABI_OFFSET(loom_named_tensor, tensor, 2);
LOOM_ABI_OFFSET(loom_checkpoint_reader, on_metadata, 3);
LOOM_ABI_OFFSET(loom_checkpoint_vtable, load, 4);

#ifdef __cplusplus
}
#endif
#endif
