/* loom/core.h: versions, errors, options and registration shared by every plugin kind.
 *
 * Usage (a whole torch-free plugin entry in C; see sdk/template for the C++ helpers):
 *
 *   #include <loom/abi.h>
 *   static const loom_host_api* host;
 *   static loom_status* register_all(loom_registry* registry) {
 *     return host->registry_add_component(registry, &my_tracker_component);
 *   }
 *   static const loom_plugin_info info = {
 *     .struct_size = sizeof(loom_plugin_info), .abi_major = LOOM_ABI_MAJOR,
 *     .abi_minor = LOOM_ABI_MINOR, .name = "my_plugin", .version = "0.1.0",
 *     .torch_fingerprint = NULL, .register_components = register_all };
 *   LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h) {
 *     host = h; return &info;
 *   }
 *
 * History: 1.0 first release. 1.1 appended tracker resume/state, hook state and
 * loom_control.request_eval and request_rollback. 1.2 batch fields, model units and metrics,
 * end of epoch. 1.3 model logits and hugging_face. 1.4 model decode (a key/value cache).
 * 1.5 sharding: loom_state_tensor.elementwise_group, loom_optimizer_vtable.requirements,
 * LOOM_PARAM_FLAG_PARTIAL; the model's units (loom_param_view.unit, host unit_boundary).
 * 1.6 tracker finish. 1.7 sparse tables (LOOM_PARAM_FLAG_SPARSE_ROWS, loom_sparse_table,
 * optimizer sparse_step), LOOM_METRIC_REDUCTION_ROC_AUC, loom_batch.end_of_data. 1.8 adapters:
 * loom_context.adapters (loom_adapter_spec), LOOM_PARAM_FLAG_ADAPTER, LOOM_PARAM_FLAG_IN_OUT.
 * 1.9 hook needs (loom_hook_needs_args): a hook says whether it reads every step's loss.
 * 1.10 tensor parallelism: loom_context.tensor_parallel_rank/_size, loom_param_view.split_dim,
 *      loom_host_api.tensor_parallel_collective (loom_collective_args).
 * 1.11 sequence parallelism: loom_context.sequence_parallel_rank/_size,
 *      loom_collective_args.group and LOOM_COLLECTIVE_ALL_TO_ALL,
 *      loom_model_vtable.sequence_parallel.
 * 1.12 loom_param_view.split_blocks: a parameter cut in blocks (fused q/k/v) over the
 *      tensor-parallel group; expert parallelism: loom_context.expert_parallel_rank/_size,
 *      LOOM_COLLECTIVE_GROUP_EXPERT, loom_model_vtable.expert_parallel.
 * 1.13 LOOM_PARAM_FLAG_EXPERT: experts placed on their expert-parallel rank only.
 * 1.14 row-sharded sparse tables: loom_context.sparse_shard_rank/_size,
 *      LOOM_COLLECTIVE_GROUP_SPARSE, a table's row window in loom_param_view.
 * 1.15 loom_model_vtable.attributes (loom_model_attributes): what a model instance handles
 *      (sequence and expert parallelism, and what comes next) in one struct that grows with
 *      the ABI; the 1.11 and 1.12 callbacks are read only from plugins without it.
 * 1.16 context parallelism: loom_context.context_parallel_rank/_size,
 *      LOOM_COLLECTIVE_RING_SHIFT, LOOM_COLLECTIVE_GROUP_CONTEXT,
 *      loom_model_attributes.context_parallel.
 * 1.17 pipeline parallelism: loom_context.pipeline_parallel_rank/_size,
 *      loom_model_forward_args.layer_begin/layer_end/hidden_in/hidden_out,
 *      loom_model_attributes.pipeline_layers.
 * 1.18 loom_host_api.param_created: the host keeps a part of each parameter as it is made.
 * 1.19 loom_host_api.param_write: a value loaded into a registered parameter as the host keeps
 *      it (loom_param_write_args).
 * 1.20 loom_dataset_info_args.resumes_other_world_size: a dataset takes every saved rank's
 *      position when a run resumes at another world size (LOOM_SAVED_WORLD_MAGIC).
 * 1.21 LOOM_OPTIMIZER_ELEMENTWISE and loom_optimizer_step_args.range_group/_begin/_end: the
 *      host may update a group piece by piece (optimizer offload overlaps the copies).
 *
 * Version rules (they live here so nobody has to guess):
 *   - Appending a field or callback to the END of a struct bumps LOOM_ABI_MINOR.
 *   - Removing, reordering or retyping a field, or changing a callback's meaning, bumps
 *     LOOM_ABI_MAJOR. Expect that to happen almost never.
 *   - The host loads any plugin whose major equals its own, whatever the minor.
 *   - Every callback added to a 1.x struct after 1.1 takes, besides the instance it acts on,
 *     exactly one argument struct, loom_<kind>_<call>_args, which begins with struct_size
 *     (PJRT's rule), and returns loom_status*. Inputs and outputs are fields of that struct,
 *     so a later minor extends the call by appending fields instead of adding a second
 *     callback. The callbacks of 1.0 and 1.1 predate the rule (model forward and optimizer
 *     step follow it; tracker note and resume and the state callbacks do not) and keep
 *     their signatures until the next major version.
 *
 * Struct rules: every struct that crosses the boundary begins with `size_t struct_size`, set
 * by whoever fills the struct to sizeof() as it was compiled. A reader treats fields beyond a
 * smaller struct_size as absent (NULL / 0) and ignores any tail beyond its own sizeof.
 * Arrays of such structs cross as arrays of pointers, so that strides never disagree; the
 * one exception is loom_component.options (see there). Fill these structs by field name
 * (C99 designated initializers, as in the examples), so that each value names its field.
 *
 * Lifetime vocabulary used in comments: "out", "borrowed for the call", "owned by X",
 * "caller frees with F", "may be NULL", "static" (lives until the process exits).
 */
#ifndef LOOM_CORE_H
#define LOOM_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_ABI_MAJOR 1
#define LOOM_ABI_MINOR 21

/* The one symbol each plugin exports. */
#define LOOM_PLUGIN_ENTRY_SYMBOL "loom_plugin_init"

#if defined(__GNUC__)
#define LOOM_EXPORT __attribute__((visibility("default")))
#else
#define LOOM_EXPORT
#endif

/* Compile-time layout checks that work in C99 and C++17. */
#define LOOM_ABI_CONCAT2(a, b) a##b
#define LOOM_ABI_CONCAT(a, b) LOOM_ABI_CONCAT2(a, b)
#define LOOM_ABI_ASSERT(cond) \
  typedef char LOOM_ABI_CONCAT(loom_abi_assert_line_, __LINE__)[(cond) ? 1 : -1]
/* Pins a field's offset in bytes on LP64 (other targets skip the check), so a reorder fails
   the build. Works for fields of any width, such as the int32 flags of loom_control. One
   assert per field: the typedef is named after type and field. */
#define LOOM_ABI_OFFSET_BYTES(type, field, bytes)                                  \
  typedef char loom_abi_offset_##type##_##field                                    \
      [(sizeof(void*) != 8 || offsetof(type, field) == (bytes)) ? 1 : -1]
/* The same in pointer-size slots: offset = slot * 8 on LP64. */
#define LOOM_ABI_OFFSET(type, field, slot) LOOM_ABI_OFFSET_BYTES(type, field, (slot) * 8)

/* Nonzero when the struct at ptr (filled by the other side) is large enough to hold field. */
#define LOOM_STRUCT_HAS(ptr, type, field) \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* Compute-plane tensor handle: an at::Tensor underneath. Only torch-linked plugins whose
   fingerprint equals the host's ever see one (rule 7 of docs/abi.md). */
typedef struct loom_torch_tensor loom_torch_tensor;

/* Defined in loom/model.h (ABI 1.5); declared here for loom_host_api.unit_boundary. */
struct loom_unit_boundary_args;
/* Defined in loom/model.h (ABI 1.10); for loom_host_api.tensor_parallel_collective. */
struct loom_collective_args;
/* Defined in loom/model.h (ABI 1.18); for loom_host_api.param_created. */
struct loom_param_created_args;
/* Defined in loom/model.h (ABI 1.19); for loom_host_api.param_write. */
struct loom_param_write_args;

/* Tokens whose target equals this index carry no loss. */
#define LOOM_IGNORE_INDEX (-100)

/* ---- Errors are values -------------------------------------------------------------- */

typedef enum loom_status_code {
  LOOM_STATUS_CODE_OK = 0,
  LOOM_STATUS_CODE_INVALID_ARGUMENT = 1, /* bad option value or input */
  LOOM_STATUS_CODE_NOT_FOUND = 2,        /* missing file, key or component */
  LOOM_STATUS_CODE_OUT_OF_RANGE = 3,     /* e.g. a finite dataset is exhausted */
  LOOM_STATUS_CODE_UNIMPLEMENTED = 4,
  LOOM_STATUS_CODE_INTERNAL = 5          /* anything else, including caught exceptions */
} loom_status_code;

/* Opaque; created and destroyed only by the host's functions below. NULL means success. */
typedef struct loom_status loom_status;

typedef enum loom_log_level {
  LOOM_LOG_LEVEL_DEBUG = 0,
  LOOM_LOG_LEVEL_INFO = 1,
  LOOM_LOG_LEVEL_WARN = 2,
  LOOM_LOG_LEVEL_ERROR = 3
} loom_log_level;

/* ---- Options: every component declares what it accepts ------------------------------ */

typedef enum loom_option_type {
  LOOM_OPTION_TYPE_INT = 0,    /* TOML integer, read with config_get_int */
  LOOM_OPTION_TYPE_FLOAT = 1,  /* TOML float or integer, read with config_get_float */
  LOOM_OPTION_TYPE_BOOL = 2,   /* TOML boolean, read with config_get_bool */
  LOOM_OPTION_TYPE_STRING = 3  /* TOML string, read with config_get_string */
} loom_option_type;

typedef struct loom_option_spec {
  size_t struct_size;
  const char* name;          /* static; a bare TOML key such as "lr" */
  loom_option_type type;
  const char* default_value; /* static; may be NULL (no default). Text of the value: "1e-3",
                                "true", "64", or a raw string without quotes */
  int32_t required;          /* nonzero: the manifest must set it (default_value ignored) */
  const char* doc;           /* static; one line shown by `host describe` */
} loom_option_spec;

/* A component's resolved options: validated against its specs, defaults filled in. */
typedef struct loom_config loom_config;

/* Where and as what a component instance runs. Filled by the host. */
typedef struct loom_context {
  size_t struct_size;
  const char* slot;      /* owned by the host, valid for the instance's life: "model", "trackers[1]" */
  const char* run_dir;   /* owned by the host, valid for the instance's life; exists already */
  uint64_t seed;         /* run.seed */
  int32_t rank;          /* data-parallel rank, 0-based */
  int32_t world_size;    /* data-parallel world size, >= 1 */
  const char* device;    /* owned by the host: "cpu", "cuda:0", ... */
  int64_t total_steps;   /* run.steps */
  /* (ABI 1.8) Models only: the manifest's [lora] adapters, NULL when it has none (and for
     every other kind). Borrowed for the create call: copy what you keep. */
  const struct loom_adapter_spec* adapters;
  /* (ABI 1.10) Models only: this rank's place in its tensor-parallel group ([distributed]
     tensor_parallel). A model that splits its matrices over the group registers only its own
     piece of each (loom_param_view.split_dim) and combines the pieces in forward through
     loom_host_api.tensor_parallel_collective. size 1 (and rank 0) without tensor parallelism,
     and for every other kind; a host older than 1.10 leaves both 0: read 0 as size 1. */
  int32_t tensor_parallel_rank;
  int32_t tensor_parallel_size;
  /* (ABI 1.11) Models only: this rank's place in its sequence-parallel group ([distributed]
     sequence_parallel = S). The host hands the model piece sequence_parallel_rank of every
     row (positions rank * T/S .. (rank + 1) * T/S - 1, every field cut the same way); a model
     that says it handles this (loom_model_vtable.sequence_parallel) exchanges its attention's
     queries, keys and values over the group (loom/sequence_parallel.hpp). size 1 (and rank 0)
     without it, and for every other kind; a host older than 1.11 leaves both 0: read 0 as 1. */
  int32_t sequence_parallel_rank;
  int32_t sequence_parallel_size;
  /* (ABI 1.12) Models only: this rank's place in its expert-parallel group ([distributed]
     expert_parallel = E): E data-parallel ranks, each reading its own batches, whose mixture-
     of-experts layers send every token to the rank that computes its expert and back
     (LOOM_COLLECTIVE_GROUP_EXPERT). A model that does so says it (loom_model_vtable.
     expert_parallel). size 1 (and rank 0) without it; a host older than 1.12 leaves both 0. */
  int32_t expert_parallel_rank;
  int32_t expert_parallel_size;
  /* (ABI 1.14) Models only: this rank's place among the ranks that split the rows of every
     sparse table ([distributed] sparse_tables = "row_sharded"): rank r of N holds rows
     r * R / N .. (r + 1) * R / N - 1 of a table of R rows (integer division) and registers only
     those, flagged LOOM_PARAM_FLAG_ROW_SHARD; lookups go to the rows' owners over
     LOOM_COLLECTIVE_GROUP_SPARSE (loom/sparse_tables.hpp). size 1 (and rank 0) with replicated
     tables; a host older than 1.14 leaves both 0: read 0 as 1. */
  int32_t sparse_shard_rank;
  int32_t sparse_shard_size;
  /* (ABI 1.16) Models only: this rank's place in its context-parallel group ([distributed]
     context_parallel = C; ring attention, loom/context_parallel.hpp). Rows of L positions are
     cut into 2C chunks of L/(2C) and rank r gets chunks r and 2C-1-r, side by side (one from
     each end, so every rank has the same causal work), every batch field cut the same way. A
     model that says it handles this (loom_model_attributes.context_parallel) passes its keys
     and values around the group (LOOM_COLLECTIVE_RING_SHIFT) and gives each token its place in
     the whole row. size 1 (and rank 0) without it; a host older than 1.16 leaves both 0. */
  int32_t context_parallel_rank;
  int32_t context_parallel_size;
  /* (ABI 1.17) Models only: this rank's pipeline stage ([distributed] pipeline_parallel = P):
     the host runs layer ranges of the model on it (loom_model_forward_args.layer_begin/
     layer_end); the model itself is built whole on every stage in 1.17. size 1 (and rank 0)
     without it; a host older than 1.17 leaves both 0. */
  int32_t pipeline_parallel_rank;
  int32_t pipeline_parallel_size;
} loom_context;

/* (ABI 1.8) Low-rank adapters (LoRA, Hu et al. 2021) a model adds to its linear layers: a layer
   whose module name (its weight's name without ".weight") equals a target or ends with "." and
   a target gets y = W x + (alpha / rank) B A dropout(x), with parameters "<module>.lora_A.weight"
   (rank, in) drawn at random and "<module>.lora_B.weight" (out, rank) starting at zero, both
   flagged LOOM_PARAM_FLAG_ADAPTER (loom/model.h). <loom/model.hpp>'s add_linear does all of it. */
typedef struct loom_adapter_spec {
  size_t struct_size;
  const char* const* targets; /* borrowed for the create call; target_count module names */
  size_t target_count;
  int64_t rank;               /* r >= 1 */
  double alpha;               /* the scale is alpha / rank */
  double dropout;             /* on the adapter's input while training; 0 for none */
} loom_adapter_spec;

/* Byte sink for component state (checkpoints). Borrowed for the call that receives it. */
typedef struct loom_byte_writer {
  size_t struct_size;
  void* user;                                                    /* pass back to write */
  loom_status* (*write)(void* user, const void* data, size_t size); /* data borrowed for the call */
} loom_byte_writer;

/* ---- Components and registration ---------------------------------------------------- */

typedef enum loom_kind {
  LOOM_KIND_MODEL = 0,       /* torch-linked; loom/model.h */
  LOOM_KIND_DATASET = 1,     /* torch-free;   loom/dataset.h */
  LOOM_KIND_OPTIMIZER = 2,   /* torch-linked; loom/optimizer.h */
  LOOM_KIND_SCHEDULE = 3,    /* torch-free;   loom/schedule.h */
  LOOM_KIND_CHECKPOINT = 4,  /* torch-free;   loom/checkpoint.h */
  LOOM_KIND_TRACKER = 5,     /* torch-free;   loom/tracker.h */
  LOOM_KIND_HOOK = 6,        /* torch-free;   loom/hook.h */
  LOOM_KIND_COUNT_ = 7
} loom_kind;

typedef struct loom_component {
  size_t struct_size;
  loom_kind kind;
  const char* name;                /* static; unique within its kind across all plugins */
  const char* summary;             /* static; one line for `host plugins` and `host describe` */
  const loom_option_spec* options; /* static; may be NULL. The host walks it with the stride
                                      options[0].struct_size, so one array = one build */
  size_t option_count;
  const void* vtable;              /* static; the kind's loom_<kind>_vtable */
} loom_component;

/* Opaque; lives only during plugin registration. */
typedef struct loom_registry loom_registry;

/* The functions the host lends to plugins. Static: valid until the process exits. */
typedef struct loom_host_api {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  /* Errors. The message is copied. Caller frees the result with status_destroy, or returns it. */
  loom_status* (*status_create)(loom_status_code code, const char* message);
  void (*status_destroy)(loom_status* status); /* accepts NULL */
  loom_status_code (*status_get_code)(const loom_status* status);
  const char* (*status_get_message)(const loom_status* status); /* owned by status */
  /* Logging through the host's logger; both strings borrowed for the call. */
  void (*log)(loom_log_level level, const char* source, const char* message);
  /* Registration; component (and all it points to) must be static. */
  loom_status* (*registry_add_component)(loom_registry* registry, const loom_component* component);
  /* Options. Keys must be declared in the component's specs. Strings are owned by config and
     valid while the create call that received the config runs: copy what you keep. */
  loom_status* (*config_get_int)(const loom_config* config, const char* key, int64_t* out);
  loom_status* (*config_get_float)(const loom_config* config, const char* key, double* out);
  loom_status* (*config_get_bool)(const loom_config* config, const char* key, int32_t* out);
  loom_status* (*config_get_string)(const loom_config* config, const char* key, const char** out);
  /* Nonzero when the key is set (by manifest or default). */
  int32_t (*config_has)(const loom_config* config, const char* key);
  /* ABI 1.5, torch-linked models only (loom/model.h loom_unit_boundary_args): called around
     the forward of each unit the model declared (loom_param_view.unit), so that with
     [distributed] shard = "parameters" the host gathers the unit's parameters before it and
     releases them after. Without sharding it hands the tensor back unchanged. */
  loom_status* (*unit_boundary)(struct loom_unit_boundary_args* args);
  /* ABI 1.10, torch-linked models only (loom/model.h loom_collective_args): a collective over
     the ranks of this rank's tensor-parallel group, for a model that splits its matrices
     ([distributed] tensor_parallel), or (ABI 1.11, loom_collective_args.group) of its
     sequence-parallel group. Every rank of the group must make the same calls in the same
     order. In a group of one the output is the input. */
  loom_status* (*tensor_parallel_collective)(struct loom_collective_args* args);
  /* ABI 1.18, torch-linked models only (loom/model.h loom_param_created_args): called by a
     model's create once for each parameter, right after it made the parameter's initial
     value, in registration order. With [distributed] shard = "parameters" the host then keeps
     only this rank's slice of the value and rebinds the tensor's storage to it, so that no rank
     holds the whole model at any time; otherwise it does nothing. */
  loom_status* (*param_created)(struct loom_param_created_args* args);
  /* ABI 1.19, torch-linked models only (loom/model.h loom_param_write_args): writes a value
     into a parameter the model registered earlier in the same create (weights it loads from a
     file, say), as the host keeps the parameter: while a build keeps a part of each parameter
     (a slice with shard = "parameters", a pipeline stage's own layers) only that part is
     written and nothing else is touched; otherwise the whole value is copied. */
  loom_status* (*param_write)(struct loom_param_write_args* args);
} loom_host_api;

/* What the entry point returns. Static. */
typedef struct loom_plugin_info {
  size_t struct_size;
  uint32_t abi_major;             /* LOOM_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor;             /* LOOM_ABI_MINOR the plugin was built with */
  const char* name;               /* static; e.g. "adamw" */
  const char* version;            /* static; the plugin's own version, e.g. "0.1.0" */
  const char* torch_fingerprint;  /* static; NULL when torch-free. Torch-linked plugins give
                                     "libtorch X.Y.Z; cxx11abi N; cuda V|none" and the host
                                     refuses any that differs from its own */
  /* Called by the host once major version and fingerprint are accepted. */
  loom_status* (*register_components)(loom_registry* registry);
} loom_plugin_info;

/* The entry point: `LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api*)`.
   host is static; the plugin may keep it. Must not fail and must not call into host except
   to keep the pointer: the versions are not negotiated yet. */
typedef const loom_plugin_info* (*loom_plugin_init_fn)(const loom_host_api* host);

/* Frozen layout: these offsets may never change. */
LOOM_ABI_OFFSET(loom_plugin_info, abi_major, 1);
LOOM_ABI_OFFSET(loom_plugin_info, name, 2);
LOOM_ABI_OFFSET(loom_plugin_info, torch_fingerprint, 4);
LOOM_ABI_OFFSET(loom_plugin_info, register_components, 5);
LOOM_ABI_OFFSET(loom_host_api, abi_major, 1);
LOOM_ABI_OFFSET(loom_host_api, status_create, 2);
LOOM_ABI_OFFSET(loom_host_api, registry_add_component, 7);
LOOM_ABI_OFFSET(loom_host_api, config_has, 12);
LOOM_ABI_OFFSET(loom_host_api, unit_boundary, 13);
LOOM_ABI_OFFSET(loom_host_api, tensor_parallel_collective, 14);
LOOM_ABI_OFFSET(loom_host_api, param_created, 15);
LOOM_ABI_OFFSET(loom_host_api, param_write, 16);
LOOM_ABI_OFFSET(loom_component, vtable, 6);
LOOM_ABI_OFFSET(loom_option_spec, doc, 5);
LOOM_ABI_OFFSET(loom_context, device, 5);
LOOM_ABI_OFFSET(loom_context, adapters, 7);
LOOM_ABI_OFFSET_BYTES(loom_context, tensor_parallel_size, 68);
LOOM_ABI_OFFSET_BYTES(loom_context, sequence_parallel_size, 76);
LOOM_ABI_OFFSET_BYTES(loom_context, expert_parallel_size, 84);
LOOM_ABI_OFFSET_BYTES(loom_context, sparse_shard_size, 92);
LOOM_ABI_OFFSET_BYTES(loom_context, context_parallel_size, 100);
LOOM_ABI_OFFSET_BYTES(loom_context, pipeline_parallel_size, 108);
LOOM_ABI_OFFSET(loom_adapter_spec, rank, 3);
LOOM_ABI_OFFSET(loom_byte_writer, write, 2);

#ifdef __cplusplus
}
#endif
#endif /* LOOM_CORE_H */
