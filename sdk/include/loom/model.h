/* loom/model.h: the model kind (torch-linked). A model owns its parameters; the host rebinds
 * their storage into one flat buffer per dtype and device, runs forward through this table and
 * calls backward itself.
 *
 *   static const loom_model_vtable vt = { .struct_size = sizeof(loom_model_vtable),
 *                                         .create = my_create, .destroy = my_destroy,
 *                                         .param_count = my_param_count,
 *                                         .param_get = my_param_get, .forward = my_forward };
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
/* (ABI 1.7) A table [rows, dim] whose gradient is row-sparse: the model reads it only through
   lookups that produce sparse gradients (at::embedding_bag or at::embedding with sparse=true).
   The host keeps it out of the flat buffers, sums its gradient across ranks as (row, value)
   pairs, and hands the touched rows to the [sparse_optimizer], so a step costs in proportion
   to the rows it touched, not the table's size. */
#define LOOM_PARAM_FLAG_SPARSE_ROWS 2u
/* (ABI 1.8) A LoRA adapter weight ("<module>.lora_A.weight" or "<module>.lora_B.weight",
   loom_adapter_spec in loom/core.h). With [lora] only these train; the host freezes the rest,
   merges them into "<module>.weight" for `host export --merge` and writes them for PEFT. */
#define LOOM_PARAM_FLAG_ADAPTER 4u
/* (ABI 1.8) A linear layer's weight stored (in, out), as Hugging Face's GPT-2 Conv1D does, not
   (out, in): merging an adapter adds (B A)^T, and PEFT's fan_in_fan_out is true. */
#define LOOM_PARAM_FLAG_IN_OUT 8u
/* (ABI 1.13) One expert's weight of a mixture of experts. Under [distributed] expert_parallel
   = E > 1 the model registers only the experts this rank computes (loom_context.
   expert_parallel_rank's share, experts in order); the host sums their gradients over the ranks
   holding the same experts only, and puts the expert group's experts together, in the order
   one process registers them, for checkpoints and exports. Register every expert of a layer one
   after another, in expert order, so that each rank's run of them sits where one process's
   whole run does. Flag them at every E (the checkpoint layout is then the same at every E). */
#define LOOM_PARAM_FLAG_EXPERT 16u
/* (ABI 1.14) With LOOM_PARAM_FLAG_SPARSE_ROWS: this rank's rows of a sparse table split by rows
   over loom_context.sparse_shard_size ranks (rows r * R / N .. (r + 1) * R / N - 1 of R), looked
   up through loom/sparse_tables.hpp. The host then leaves the table's gradient on this rank
   (the lookups already sent every rank's gradient rows to their owner) and counts the rows of
   all ranks as the table. Set it exactly when sparse_shard_size > 1; the host refuses a row-
   sharded run whose sparse tables lack it, and a replicated one whose tables carry it. */
#define LOOM_PARAM_FLAG_ROW_SHARD 32u

typedef struct loom_param_view {
  size_t struct_size;       /* set by the host to its sizeof; write only fields inside it */
  const char* name;         /* out; owned by the model, e.g. "fc1.weight" */
  loom_torch_tensor* tensor;/* out; owned by the model. The host may rebind its storage
                               (set_data) to a view of a flat buffer; the model keeps using it */
  uint32_t flags;           /* out; LOOM_PARAM_FLAG_* */
  /* ABI 1.5. out; the host sets -1 first. The unit (a layer, numbered from 0 in forward
     order) this parameter belongs to; -1: none (embeddings, final norm, output layer). A
     unit's parameters are registered one after another, and the model's forward calls the
     host's unit_boundary around each unit (loom::Model::enter_unit / exit_unit). */
  int64_t unit;
  /* ABI 1.10. out; the host sets -1 first. With [distributed] tensor_parallel = T > 1: the
     dimension along which the model cut this parameter into T equal pieces, of which it
     registered piece loom_context.tensor_parallel_rank (the whole tensor is the pieces of
     ranks 0..T-1 concatenated along it); -1: the model holds it whole on every rank of the
     group, and its gradient must then be the same on all of them. */
  int64_t split_dim;
  /* ABI 1.12. out; the host sets 1 first. With split_dim >= 0: along split_dim the whole
     tensor is this many equal blocks side by side (GPT-2's fused c_attn: q, k and v, 3), each
     cut into loom_context.tensor_parallel_size equal pieces; this rank registered its piece of
     every block, in block order. 1: the plain cut described at split_dim. A host older than
     1.12 cannot read it: the SDK refuses to register a parameter of more blocks there. */
  int64_t split_blocks;
} loom_param_view;

/* (ABI 1.18) The host's param_created (loom/core.h). */
typedef struct loom_param_created_args {
  size_t struct_size;
  const char* name;          /* borrowed for the call; as loom_param_view.name will give it */
  loom_torch_tensor* tensor; /* borrowed for the call; the parameter the model keeps, holding
                                its initial value. The host may rebind its storage (every
                                handle to it sees that): write to it through the tensor only */
} loom_param_created_args;

/* (ABI 1.19) The host's param_write (loom/core.h). */
typedef struct loom_param_write_args {
  size_t struct_size;
  const char* name;           /* borrowed for the call; the parameter's registered name */
  loom_torch_tensor* tensor;  /* borrowed for the call; the parameter as registered */
  loom_torch_tensor* value;   /* borrowed for the call; its shape, any dtype it converts from */
} loom_param_write_args;

/* (ABI 1.5) The host's unit_boundary (loom/core.h). */
typedef enum loom_unit_phase {
  LOOM_UNIT_ENTER = 0, /* input is the unit's input, before its forward */
  LOOM_UNIT_EXIT = 1   /* input is the unit's output, after its forward */
} loom_unit_phase;

typedef struct loom_unit_boundary_args {
  size_t struct_size;
  int64_t unit;                   /* as declared in loom_param_view.unit */
  int32_t phase;                  /* loom_unit_phase */
  const loom_torch_tensor* input; /* borrowed for the call */
  loom_torch_tensor* output;      /* owned by the plugin; the host assigns the tensor the model
                                     goes on with (input itself, or an alias whose backward
                                     gathers the unit's parameters again) */
} loom_unit_boundary_args;

/* (ABI 1.10) The host's tensor_parallel_collective (loom/core.h). */
typedef enum loom_collective_op {
  LOOM_COLLECTIVE_ALL_REDUCE_SUM = 0, /* output: the elementwise sum of every rank's input */
  LOOM_COLLECTIVE_ALL_REDUCE_MAX = 1, /* output: the elementwise maximum */
  LOOM_COLLECTIVE_ALL_GATHER = 2,     /* output: every rank's input, concatenated along dim 0
                                         in rank order (inputs of equal shape) */
  /* (ABI 1.11) input: dim 0 cut into group-size equal chunks, chunk j for rank j; output: the
     same shape, chunk i the one rank i sent to this rank */
  LOOM_COLLECTIVE_ALL_TO_ALL = 3,
  /* (ABI 1.16) input goes to the next rank of the group (rank + 1, the last to 0); output: the
     input of the previous rank (rank - 1, 0 gets the last's), of the same shape on every rank.
     One step of a ring: C - 1 of them show every rank every other rank's input. */
  LOOM_COLLECTIVE_RING_SHIFT = 4
} loom_collective_op;

/* (ABI 1.11) Which of the model's groups a collective spans. */
typedef enum loom_collective_group {
  LOOM_COLLECTIVE_GROUP_TENSOR = 0,  /* loom_context.tensor_parallel_size ranks */
  LOOM_COLLECTIVE_GROUP_SEQUENCE = 1, /* loom_context.sequence_parallel_size ranks */
  LOOM_COLLECTIVE_GROUP_EXPERT = 2,   /* (ABI 1.12) loom_context.expert_parallel_size ranks */
  LOOM_COLLECTIVE_GROUP_SPARSE = 3,   /* (ABI 1.14) loom_context.sparse_shard_size ranks */
  LOOM_COLLECTIVE_GROUP_CONTEXT = 4   /* (ABI 1.16) loom_context.context_parallel_size ranks */
} loom_collective_group;

typedef struct loom_collective_args {
  size_t struct_size;
  int32_t op;                     /* loom_collective_op */
  const loom_torch_tensor* input; /* borrowed for the call; not changed */
  loom_torch_tensor* output;      /* owned by the plugin; the host assigns a new tensor. No
                                     autograd: loom/tensor_parallel.hpp wraps it in functions
                                     with the right backward */
  int32_t group;                  /* (ABI 1.11) loom_collective_group; absent: the tensor group */
} loom_collective_args;

/* (ABI 1.2) One named field of the batch (loom/dataset.h lists the standard names). */
typedef struct loom_batch_field {
  size_t struct_size;
  const char* name;                /* borrowed for the call */
  const loom_torch_tensor* tensor; /* borrowed for the call; on the run device, the dataset's
                                      dtype and shape */
} loom_batch_field;

/* (ABI 1.2) How a metric the model reports combines over the micro-batches of a step, the
   ranks, and the steps of a log window (trackers get one value per metric and log). */
typedef enum loom_metric_reduction {
  LOOM_METRIC_REDUCTION_SUM = 0,  /* summed over micro-batches and ranks; logged per step (the
                                     window's mean of those sums) */
  LOOM_METRIC_REDUCTION_MEAN = 1, /* mean weighted by each micro-batch's units */
  LOOM_METRIC_REDUCTION_MAX = 2,  /* the largest value seen */
  /* (ABI 1.7) value: float [N, 2], one (score, label) row per sample, label 0 or 1. The host
     keeps every row of the log window (or of the whole evaluation) from every micro-batch and
     rank and logs the exact area under the ROC curve over all of them (tied scores count one
     half), not a mean of per-batch values. */
  LOOM_METRIC_REDUCTION_ROC_AUC = 3
} loom_metric_reduction;

/* (ABI 1.2) Reports one named scalar for this micro-batch. name: borrowed for the call, lower
   snake case; value: borrowed for the call, a one-element tensor on the run device (float
   [N, 2] for LOOM_METRIC_REDUCTION_ROC_AUC) (the host
   copies it and reads it only on log steps, so reporting costs no host sync). */
typedef loom_status* (*loom_report_metric_fn)(void* metrics, const char* name, const loom_torch_tensor* value,
                                              loom_metric_reduction reduction);

typedef struct loom_model_forward_args {
  size_t struct_size;
  const loom_torch_tensor* inputs;  /* borrowed for the call; int64 [B, T] on the run device */
  const loom_torch_tensor* targets; /* borrowed for the call; int64 [B, T]; LOOM_IGNORE_INDEX
                                       marks positions without loss */
  loom_torch_tensor* loss_sum;      /* out; a host-owned slot: assign the scalar SUM of the
                                       per-token losses (the host normalizes by token count) */
  /* (ABI 1.2) The batch's fields beyond inputs (input_ids) and targets (labels), in the order
     the dataset added them; borrowed for the call. field_count 0: the dataset gave none. */
  const loom_batch_field* const* fields;
  size_t field_count;
  /* (ABI 1.2) out; a host-owned slot, undefined on entry. Assign a one-element tensor: how many
     loss-carrying units this micro-batch had (samples, for a per-sample loss). The host then
     divides the loss sums by these units, summed over micro-batches and ranks, instead of by
     the label tokens. Left undefined: the units are the labels that are not LOOM_IGNORE_INDEX. */
  loom_torch_tensor* units;
  void* metrics;                       /* (ABI 1.2) owned by the host; pass to report_metric */
  loom_report_metric_fn report_metric; /* (ABI 1.2) may be NULL: a host older than 1.2 */
  /* (ABI 1.17) Pipeline parallelism (loom_model_attributes.pipeline_layers = L > 0): run
     layers layer_begin .. layer_end - 1 of the L only. The host sets layer_begin 0 and
     layer_end -1 (the whole model: a host older than 1.17 leaves both 0, read the same way).
     layer_begin 0: start from inputs (the embedding); otherwise from hidden_in, what the call
     for the layers before assigned to hidden_out. layer_end L: end with the output layer and
     assign loss_sum (and units, metrics) as for the whole model; otherwise assign hidden_out,
     the hidden state leaving layer layer_end - 1, and leave loss_sum alone. inputs, targets and
     fields are the whole micro-batch's in every call. */
  int64_t layer_begin;
  int64_t layer_end;
  const loom_torch_tensor* hidden_in; /* borrowed for the call; a leaf the host differentiates
                                         against (undefined when layer_begin is 0) */
  loom_torch_tensor* hidden_out;      /* out; a host-owned slot: one tensor, the same shape and
                                         dtype for every micro-batch of equal shape */
} loom_model_forward_args;

/* (ABI 1.3) The next-token logits of a batch, with no loss and no backward: for `host export`
   checks, evaluation tools and tests. */
typedef struct loom_model_logits_args {
  size_t struct_size;
  const loom_torch_tensor* inputs;       /* borrowed for the call; int64 [B, T] on the run device */
  const loom_batch_field* const* fields; /* as in loom_model_forward_args; may be NULL */
  size_t field_count;
  loom_torch_tensor* logits;             /* out; a host-owned slot: assign float [B, T, V] */
} loom_model_logits_args;

/* (ABI 1.3) The model as a Hugging Face checkpoint, for `host export --format hf`. The model
   sets `json` to a UTF-8 JSON object it owns (valid until destroy):
     "config"             the object config.json holds (architectures, model_type, sizes);
     "generation_config"  optional, the object generation_config.json holds;
     "files_from"         optional, a folder whose tokenizer files the export copies.
   Its parameters' names must be the architecture's Hugging Face names. Left NULL: the model
   is not a Hugging Face architecture and is not exported as one. */
typedef struct loom_model_hugging_face_args {
  size_t struct_size;
  const char* json; /* out */
} loom_model_hugging_face_args;

/* (ABI 1.4) Next-token logits for generation with the model's own key/value cache: the model
   keeps the keys and values of the positions it has seen and computes only the new ones, so a
   decoding step costs one position, not the whole sequence. One sequence set at a time. */
typedef struct loom_model_decode_args {
  size_t struct_size;
  const loom_torch_tensor* inputs; /* borrowed for the call; int64 [B, T] on the run device: the
                                      tokens at positions past .. past + T - 1 of each row */
  int64_t past;                    /* positions already cached; 0 starts new sequences and drops
                                      the cache. Any other value must equal what the model holds */
  loom_torch_tensor* logits;       /* out; a host-owned slot: assign float [B, T, V] */
} loom_model_decode_args;

/* (ABI 1.15) What a model instance handles beyond one process's plain training step. The
   host zeroes it and sets struct_size to its own sizeof; the plugin writes the fields that fit
   (LOOM_STRUCT_HAS). A capability added later is a field appended here, never a callback. */
typedef struct loom_model_attributes {
  size_t struct_size;
  /* Nonzero: this instance handles sequence parallelism (loom_context.sequence_parallel_size
     > 1): its forward takes one piece of each row and attends across the whole row through the
     sequence group. 0: the host refuses [distributed] sequence_parallel > 1 for it, since
     attention over a piece alone would be silently wrong. */
  int32_t sequence_parallel;
  /* Nonzero: this instance handles expert parallelism (loom_context.expert_parallel_size > 1):
     its mixture-of-experts layers compute only this rank's experts, for the tokens of every
     rank of the group. 0: the host refuses [distributed] expert_parallel > 1 for it. */
  int32_t expert_parallel;
  /* (ABI 1.16) Nonzero: this instance handles context parallelism (loom_context.
     context_parallel_size > 1): its forward takes two chunks of each row and attends over the
     whole row by passing keys and values around the context group (ring attention). 0 or
     absent: the host refuses [distributed] context_parallel > 1 for it. */
  int32_t context_parallel;
  /* (ABI 1.17) L > 0: this instance can be cut into pipeline stages between its L layers
     (loom_model_forward_args.layer_begin/layer_end), every layer's parameters declared with
     loom_param_view.unit = its layer. 0 or absent: the host refuses [distributed]
     pipeline_parallel > 1 for it. */
  int32_t pipeline_layers;
} loom_model_attributes;

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
  /* (ABI 1.3) Optional: the next-token logits, no loss (loom_model_logits_args). */
  loom_status* (*logits)(loom_model* model, const loom_model_logits_args* args);
  /* (ABI 1.3) Optional: the model as a Hugging Face checkpoint (loom_model_hugging_face_args). */
  loom_status* (*hugging_face)(const loom_model* model, loom_model_hugging_face_args* args);
  /* (ABI 1.4) Optional: cached next-token logits for generation (loom_model_decode_args);
     without it `host generate` recomputes the whole sequence with `logits` each step. */
  loom_status* (*decode)(loom_model* model, const loom_model_decode_args* args);
  /* (ABI 1.11, 1.12) Superseded by attributes (1.15), which the host reads instead whenever
     it is set; kept for plugins built for 1.11 to 1.14. Nonzero: as loom_model_attributes'
     sequence_parallel and expert_parallel. NULL: not handled. */
  int32_t (*sequence_parallel)(const loom_model* model);
  int32_t (*expert_parallel)(const loom_model* model);
  /* (ABI 1.15) Optional: what this instance handles (loom_model_attributes). NULL or absent:
     the host asks sequence_parallel and expert_parallel above. */
  loom_status* (*attributes)(const loom_model* model, loom_model_attributes* out);
} loom_model_vtable;

LOOM_ABI_OFFSET(loom_param_view, flags, 3);
LOOM_ABI_OFFSET(loom_param_view, unit, 4);
LOOM_ABI_OFFSET(loom_param_view, split_dim, 5);
LOOM_ABI_OFFSET(loom_param_view, split_blocks, 6);
LOOM_ABI_OFFSET(loom_collective_args, input, 2);
LOOM_ABI_OFFSET(loom_collective_args, output, 3);
LOOM_ABI_OFFSET(loom_collective_args, group, 4);
LOOM_ABI_OFFSET(loom_unit_boundary_args, input, 3);
LOOM_ABI_OFFSET(loom_param_created_args, tensor, 2);
LOOM_ABI_OFFSET(loom_param_write_args, value, 3);
LOOM_ABI_OFFSET(loom_unit_boundary_args, output, 4);
LOOM_ABI_OFFSET(loom_model_forward_args, loss_sum, 3);
LOOM_ABI_OFFSET(loom_model_forward_args, field_count, 5);
LOOM_ABI_OFFSET(loom_model_forward_args, report_metric, 8);
LOOM_ABI_OFFSET(loom_model_forward_args, layer_begin, 9);
LOOM_ABI_OFFSET(loom_model_forward_args, hidden_out, 12);
LOOM_ABI_OFFSET(loom_batch_field, tensor, 2);
LOOM_ABI_OFFSET(loom_model_vtable, forward, 5);
LOOM_ABI_OFFSET(loom_model_vtable, flops_per_token, 7);
LOOM_ABI_OFFSET(loom_model_vtable, hugging_face, 9);
LOOM_ABI_OFFSET(loom_model_logits_args, logits, 4);
LOOM_ABI_OFFSET(loom_model_hugging_face_args, json, 1);
LOOM_ABI_OFFSET(loom_model_vtable, decode, 10);
LOOM_ABI_OFFSET(loom_model_vtable, sequence_parallel, 11);
LOOM_ABI_OFFSET(loom_model_vtable, expert_parallel, 12);
LOOM_ABI_OFFSET(loom_model_vtable, attributes, 13);
LOOM_ABI_OFFSET_BYTES(loom_model_attributes, expert_parallel, 12);
LOOM_ABI_OFFSET_BYTES(loom_model_attributes, pipeline_layers, 20);
LOOM_ABI_OFFSET(loom_model_decode_args, past, 2);
LOOM_ABI_OFFSET(loom_model_decode_args, logits, 3);

#ifdef __cplusplus
}
#endif
#endif
