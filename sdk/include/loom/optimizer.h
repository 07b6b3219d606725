/* loom/optimizer.h: the optimizer kind (torch-linked). The host owns parameters and gradients
 * as flat 1-D buffers, one group per dtype and device. The optimizer gets those buffers and a
 * segment table, so a whole update is a handful of ops over one tensor.
 *
 *   static const loom_optimizer_vtable vt = { .struct_size = sizeof(loom_optimizer_vtable),
 *                                             .create = my_create, .destroy = my_destroy,
 *                                             .step = my_step };
 *   Most authors derive from loom::Optimizer in <loom/optimizer.hpp> instead.
 */
#ifndef LOOM_OPTIMIZER_H
#define LOOM_OPTIMIZER_H
#include "core.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_optimizer loom_optimizer; /* plugin-defined */

/* Set by the host (ABI 1.5) on a segment that is only a piece of its parameter: with
 * [distributed] shard, each rank's optimizer sees one slice of each flat buffer, and a slice
 * edge may cut a parameter. shape is then the whole parameter's; numel is the piece's. */
#define LOOM_PARAM_FLAG_PARTIAL 0x80000000u

/* loom_optimizer_vtable.requirements (ABI 1.5). */
#define LOOM_OPTIMIZER_NEEDS_WHOLE_TENSORS 1u /* the update reads a whole parameter at once (a
                                                 per-tensor norm, a matrix preconditioner):
                                                 the host refuses to shard it */
#define LOOM_OPTIMIZER_ELEMENTWISE 2u /* (ABI 1.21) each element's update reads only that
                                         element of the params, grads and elementwise state
                                         (and lr, step): the host may then call step once
                                         per piece of a group (loom_optimizer_step_args'
                                         range), and the result is the whole step's, bit
                                         for bit */

/* One parameter inside a flat buffer (or, flagged LOOM_PARAM_FLAG_PARTIAL, a piece of one). */
typedef struct loom_param_segment {
  size_t struct_size;
  const char* name;      /* owned by the host; valid for the optimizer's life */
  int64_t offset;        /* first element inside the group's flat buffers */
  int64_t numel;
  int32_t ndim;
  const int64_t* shape;  /* owned by the host; ndim entries; valid for the optimizer's life */
  uint32_t flags;        /* LOOM_PARAM_FLAG_* from the model */
} loom_param_segment;

/* Parameters of one dtype and device. */
typedef struct loom_param_group {
  size_t struct_size;
  loom_torch_tensor* params;   /* owned by the host; 1-D, contiguous; update it in place */
  loom_torch_tensor* grads;    /* owned by the host; same shape; already reduced and clipped */
  const loom_param_segment* const* segments; /* owned by the host; segment_count pointers */
  size_t segment_count;
} loom_param_group;

/* (ABI 1.7) One sparse table: a model parameter flagged LOOM_PARAM_FLAG_SPARSE_ROWS. */
typedef struct loom_sparse_table {
  size_t struct_size;
  const char* name;          /* owned by the host; valid for the optimizer's life */
  loom_torch_tensor* weight; /* owned by the model; [rows, dim], contiguous; update touched rows in place */
} loom_sparse_table;

typedef struct loom_param_groups {
  size_t struct_size;
  const loom_param_group* const* groups; /* owned by the host; valid for the optimizer's life */
  size_t group_count;
  /* (ABI 1.7) The sparse tables, for an optimizer named in [sparse_optimizer]; NULL and 0 for
     the dense [optimizer] (which then has no sparse tables to update). */
  const loom_sparse_table* const* sparse_tables;
  size_t sparse_table_count;
} loom_param_groups;

/* (ABI 1.7) The rows of one table this step touched, with their summed gradient. */
typedef struct loom_sparse_grad {
  size_t struct_size;
  size_t table;                     /* index into loom_param_groups.sparse_tables */
  const loom_torch_tensor* rows;    /* borrowed for the call; int64 [n], unique, ascending */
  const loom_torch_tensor* values;  /* borrowed for the call; [n, dim], the weight's dtype and
                                       device: already summed over micro-batches and ranks,
                                       normalized and clipped like the dense gradients */
} loom_sparse_grad;

/* (ABI 1.7) Arguments of sparse_step: one entry per table that has touched rows. */
typedef struct loom_sparse_step_args {
  size_t struct_size;
  double lr;     /* this step's learning rate: the optimizer's "lr" times the schedule's factor */
  int64_t step;  /* 1-based number of this optimizer step */
  const loom_sparse_grad* const* grads; /* borrowed for the call */
  size_t grad_count;
} loom_sparse_step_args;

typedef struct loom_optimizer_step_args {
  size_t struct_size;
  double lr;     /* this step's learning rate: the "lr" option times the schedule's factor */
  int64_t step;  /* 1-based number of this optimizer step */
  /* (ABI 1.21) Given only to an optimizer that declares LOOM_OPTIMIZER_ELEMENTWISE. When
     range_end > range_begin, update elements [range_begin, range_end) of group range_group
     (and the elementwise state that follows them) and nothing else; the host then calls step
     once per piece, with the same lr and step, and the pieces of one optimizer step cover
     every element of every group exactly once. 0, 0 (a host before 1.21): every group, whole. */
  uint64_t range_group;
  int64_t range_begin;
  int64_t range_end;
} loom_optimizer_step_args;

/* A named piece of optimizer state, for checkpoints. */
typedef struct loom_state_tensor {
  size_t struct_size;       /* set by the host; write only fields inside it */
  const char* name;         /* out; owned by the optimizer, e.g. "exp_avg.0" */
  loom_torch_tensor* tensor;/* out; owned by the optimizer; the host may copy into it on load */
  /* ABI 1.5. out; the host sets -1 first. The index of the group whose params this tensor
     follows element for element (1-D, the same numel), e.g. Adam's moments. Such state is
     sharded with the group and resharded on resume; any other state must hold the same
     values on every rank (a step count) and is saved once. (ABI 1.14) For a
     [sparse_optimizer], which has no dense groups, it names the sparse table whose rows dim 0
     follows (per-row state, gathered and cut by rows when the tables are row-sharded). */
  int64_t elementwise_group;
} loom_state_tensor;

typedef struct loom_optimizer_vtable {
  size_t struct_size;
  /* Required */
  loom_status* (*create)(const loom_context* context, const loom_config* config,
                         const loom_param_groups* groups, /* borrowed; pointers inside live
                                                            as long as the optimizer */
                         loom_optimizer** out);          /* out: destroy with destroy */
  void (*destroy)(loom_optimizer* optimizer);            /* accepts NULL */
  loom_status* (*step)(loom_optimizer* optimizer, const loom_optimizer_step_args* args);
  /* Optional */
  size_t (*state_count)(const loom_optimizer* optimizer);
  loom_status* (*state_get)(loom_optimizer* optimizer, size_t index, loom_state_tensor* out);
  /* ABI 1.5: LOOM_OPTIMIZER_NEEDS_WHOLE_TENSORS or 0 (absent: 0) */
  uint64_t requirements;
  /* (ABI 1.7) Optional: updates only the rows each table's gradient touched; rows not listed
     must stay bit-identical. An optimizer with sparse_step can be named in [sparse_optimizer];
     there the host calls sparse_step and never step. Its per-row state (state_get) holds the
     same values on every rank: the host gives every rank the same summed rows. */
  loom_status* (*sparse_step)(loom_optimizer* optimizer, const loom_sparse_step_args* args);
} loom_optimizer_vtable;

LOOM_ABI_OFFSET(loom_param_segment, shape, 5);
LOOM_ABI_OFFSET(loom_param_group, segment_count, 4);
LOOM_ABI_OFFSET(loom_optimizer_step_args, step, 2);
LOOM_ABI_OFFSET(loom_optimizer_step_args, range_end, 5);
LOOM_ABI_OFFSET(loom_optimizer_vtable, step, 3);
LOOM_ABI_OFFSET(loom_optimizer_vtable, state_get, 5);
LOOM_ABI_OFFSET(loom_optimizer_vtable, requirements, 6);
LOOM_ABI_OFFSET(loom_state_tensor, elementwise_group, 3);
LOOM_ABI_OFFSET(loom_optimizer_vtable, sparse_step, 7);
LOOM_ABI_OFFSET(loom_param_groups, sparse_table_count, 4);
LOOM_ABI_OFFSET(loom_sparse_table, weight, 2);
LOOM_ABI_OFFSET(loom_sparse_grad, values, 3);
LOOM_ABI_OFFSET(loom_sparse_step_args, grad_count, 4);

#ifdef __cplusplus
}
#endif
#endif
