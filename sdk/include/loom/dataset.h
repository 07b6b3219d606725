/* loom/dataset.h: the dataset kind (torch-free). Batches cross as DLPack tensors.
 *
 *   static const loom_dataset_vtable vt = { .struct_size = sizeof(loom_dataset_vtable),
 *                                           .create = my_create, .destroy = my_destroy,
 *                                           .next = my_next };
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

/* Standard names of batch fields (ABI 1.2). inputs and targets ARE input_ids and labels; the
 * others travel through add_field. A workload may add fields of its own under other names.
 *   input_ids       int64 [B, T]: the tokens fed to the model (loom_batch.inputs)
 *   labels          int64 [B, T]: the tokens to predict; LOOM_IGNORE_INDEX where no loss
 *                   (loom_batch.targets)
 *   position_ids    int64 [B, T]: each token's position in its document (restarts at 0 for
 *                   every document of a packed row)
 *   document_ids    int64 [B, T]: which document of the row a token belongs to; attention never
 *                   crosses from one document to another
 *   attention_mask  int64 or uint8 [B, T]: 1 for real tokens, 0 for padding
 *   loss_weight     float32 [B, T]: a weight per label position
 * Ragged data crosses as two fields, NAME_values and NAME_offsets (int64, one more entry than
 * rows, offsets[0] = 0), as in CSR. */

/* (ABI 1.2) Hands one named field of a batch to the host. name: borrowed for the call, lower
   snake case, unique within the batch, not input_ids or labels. tensor: any rank, on the CPU,
   of a dtype DLPack and LibTorch share (int8/16/32/64, uint8, float16/32/64, bfloat16); ownership passes to the host, which calls its deleter even when this fails. */
typedef loom_status* (*loom_batch_add_field_fn)(void* fields, const char* name, DLManagedTensor* tensor);

typedef struct loom_batch {
  size_t struct_size;       /* set by the host */
  DLManagedTensor* inputs;  /* out; int64 [B, T] on CPU; the host takes ownership and calls
                               its deleter */
  DLManagedTensor* targets; /* out; int64 [B, T] on CPU; same ownership; LOOM_IGNORE_INDEX
                               marks positions without loss */
  /* (ABI 1.2) Set by the host before it calls next; a dataset keeps both as they are. Call
     add_field(fields, name, tensor) once per field beyond inputs and targets. NULL when the
     host predates 1.2: the dataset then frees its extra fields itself. */
  void* fields;                      /* owned by the host; pass it back to add_field */
  loom_batch_add_field_fn add_field; /* may be NULL */
  /* (ABI 1.2) out; 0 on entry. A finite dataset sets it to 1, giving no inputs, targets or
     fields, when this epoch has no batch left; the host then fires epoch_end and epoch_begin
     and calls next again for the first batch of the next epoch. Endless datasets never set it. */
  int32_t end_of_epoch;
  /* (ABI 1.7) out; 0 on entry. A finite stream sets it to 1, giving no tensors, when it has no
     batch left at all (a stream of windows that ends; an epoch never restarts). The run then
     stops before the step that needed the batch, on every rank at the same step: when one
     rank's data runs out, all ranks end there. Endless and epoch-looping datasets never set it. */
  int32_t end_of_data;
} loom_batch;

/* (ABI 1.2) What a dataset knows of itself; the host fills struct_size, the dataset the rest. */
typedef struct loom_dataset_info_args {
  size_t struct_size;
  int64_t batches_per_epoch; /* out; batches of one epoch on this rank; 0: endless or unknown */
  /* (ABI 1.20) out; 0 on entry. 1: when a run resumes at another world size and the saved
     ranks' positions differ, state_load takes all of them, in a LOOM_SAVED_WORLD_MAGIC record
     (below), and this rank continues with its share of what they had left. 0: such a resume is
     refused by the host (equal positions are handed to every rank as they are). */
  int32_t resumes_other_world_size;
} loom_dataset_info_args;

/* (ABI 1.20) The record state_load gets when resumes_other_world_size is 1 and the run that
   saved had another world size. Little-endian:
     "LOOMSVW1" | u32 saved world size S | u32 0 | S x (u64 n | n bytes: rank r's saved state)
   The host builds it from a checkpoint; a dataset still checks every size against the record's
   length (loom/dataset.hpp decode_saved_world does). */
#define LOOM_SAVED_WORLD_MAGIC "LOOMSVW1"

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
  /* Optional (ABI 1.2): the epoch length, which run.epochs needs to know the run's steps. */
  loom_status* (*info)(loom_dataset* dataset, loom_dataset_info_args* args);
} loom_dataset_vtable;

LOOM_ABI_OFFSET(loom_batch, targets, 2);
LOOM_ABI_OFFSET(loom_batch, add_field, 4);
LOOM_ABI_OFFSET(loom_batch, end_of_epoch, 5);
LOOM_ABI_OFFSET_BYTES(loom_batch, end_of_data, 44);
LOOM_ABI_OFFSET(loom_dataset_vtable, next, 3);
LOOM_ABI_OFFSET(loom_dataset_vtable, state_load, 5);
LOOM_ABI_OFFSET(loom_dataset_vtable, info, 6);
LOOM_ABI_OFFSET(loom_dataset_info_args, batches_per_epoch, 1);
LOOM_ABI_OFFSET(loom_dataset_info_args, resumes_other_world_size, 2);

#ifdef __cplusplus
}
#endif
#endif
