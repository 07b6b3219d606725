/* loom/model.h: the model kind (torch-linked). A model owns its parameters; the host rebinds
 * their storage into one flat buffer per dtype and device, runs forward through this table and
 * calls backward itself.
 *
 *   static const loom_model_vtable vt = { sizeof(loom_model_vtable), my_create, my_destroy,
 *                                         my_param_count, my_param_get, my_forward };
 *   Most authors derive from loom::Model in <loom/model.hpp> instead.
 */
#ifndef LOOM_MODEL_H
#define LOOM_MODEL_H
#include "core.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_model loom_model; /* plugin-defined */

#define LOOM_PARAM_FLAG_NO_DECAY 1u /* norms, biases, embeddings the author exempts */

typedef struct loom_param_view {
  size_t struct_size;       /* set by the host to its sizeof; write only fields inside it */
  const char* name;         /* out; owned by the model, e.g. "fc1.weight" */
  loom_torch_tensor* tensor;/* out; owned by the model. The host may rebind its storage
                               (set_data) to a view of a flat buffer; the model keeps using it */
  uint32_t flags;           /* out; LOOM_PARAM_FLAG_* */
} loom_param_view;

typedef struct loom_model_forward_args {
  size_t struct_size;
  const loom_torch_tensor* inputs;  /* borrowed for the call; int64 [B, T] on the run device */
  const loom_torch_tensor* targets; /* borrowed for the call; int64 [B, T]; LOOM_IGNORE_INDEX
                                       marks positions without loss */
  loom_torch_tensor* loss_sum;      /* out; a host-owned slot: assign the scalar SUM of the
                                       per-token losses (the host normalizes by token count) */
} loom_model_forward_args;

typedef struct loom_model_vtable {
  size_t struct_size;
  /* Required */
  loom_status* (*create)(const loom_context* context, const loom_config* config,
                         loom_model** out); /* out: destroy with destroy */
  void (*destroy)(loom_model* model);       /* accepts NULL */
  size_t (*param_count)(const loom_model* model);
  loom_status* (*param_get)(loom_model* model, size_t index, loom_param_view* out);
  loom_status* (*forward)(loom_model* model, const loom_model_forward_args* args);
  /* Optional (NULL or absent: not supported) */
  loom_status* (*set_training)(loom_model* model, int32_t training); /* dropout on/off */
  double (*flops_per_token)(const loom_model* model); /* forward+backward FLOPs, for MFU */
} loom_model_vtable;

LOOM_ABI_OFFSET(loom_param_view, flags, 3);
LOOM_ABI_OFFSET(loom_model_forward_args, loss_sum, 3);
LOOM_ABI_OFFSET(loom_model_vtable, forward, 5);
LOOM_ABI_OFFSET(loom_model_vtable, flops_per_token, 7);

#ifdef __cplusplus
}
#endif
#endif
