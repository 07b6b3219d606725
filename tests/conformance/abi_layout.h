/* abi_layout.h: the ABI layout facts the conformance suite checks, as X-macro lists shared by
 * a C99 translation unit (abi_layout.c) and the C++ test (abi_layout_test.cpp), so the two
 * languages' views of every struct can be compared. */
#ifndef LOOM_CONFORMANCE_ABI_LAYOUT_H
#define LOOM_CONFORMANCE_ABI_LAYOUT_H

#include <loom/abi.h>

/* Every struct that crosses the boundary. */
#define LOOM_ABI_STRUCTS(X)                                                                    \
  X(loom_option_spec) X(loom_context) X(loom_byte_writer) X(loom_component) X(loom_host_api)   \
  X(loom_plugin_info) X(loom_batch) X(loom_dataset_vtable) X(loom_state_view) X(loom_control)  \
  X(loom_hook_vtable) X(loom_param_view) X(loom_model_forward_args) X(loom_model_vtable)       \
  X(loom_param_segment) X(loom_param_group) X(loom_param_groups) X(loom_optimizer_step_args)   \
  X(loom_state_tensor) X(loom_optimizer_vtable) X(loom_schedule_vtable) X(loom_metric)         \
  X(loom_metrics) X(loom_tracker_vtable) X(loom_named_tensor) X(loom_checkpoint_reader)        \
  X(loom_checkpoint_vtable) X(loom_batch_field) X(loom_dataset_info_args)                      \
  X(loom_model_logits_args) X(loom_model_hugging_face_args) X(loom_model_decode_args)          \
  X(loom_tracker_finish_args) X(loom_sparse_table) X(loom_sparse_grad) X(loom_sparse_step_args) \
  X(loom_adapter_spec)                                                                          \
  X(loom_hook_needs_args) X(loom_collective_args) X(loom_model_attributes)                      \
  X(loom_param_created_args) X(loom_param_write_args)

/* (type, field, slot): the frozen offsets the headers assert with LOOM_ABI_OFFSET, in
 * pointer-size slots on LP64 (offset = slot * 8). */
#define LOOM_ABI_FROZEN_OFFSETS(X)                                                              \
  X(loom_plugin_info, abi_major, 1) X(loom_plugin_info, name, 2)                               \
  X(loom_plugin_info, torch_fingerprint, 4) X(loom_plugin_info, register_components, 5)       \
  X(loom_host_api, abi_major, 1) X(loom_host_api, status_create, 2)                            \
  X(loom_host_api, registry_add_component, 7) X(loom_host_api, config_has, 12)                 \
  X(loom_component, vtable, 6) X(loom_option_spec, doc, 5) X(loom_context, device, 5)          \
  X(loom_byte_writer, write, 2) X(loom_batch, targets, 2) X(loom_dataset_vtable, next, 3)      \
  X(loom_dataset_vtable, state_load, 5) X(loom_state_view, metrics, 8)                         \
  X(loom_control, skip_step, 2) X(loom_hook_vtable, on_event, 3) X(loom_param_view, flags, 3)  \
  X(loom_model_forward_args, loss_sum, 3) X(loom_model_vtable, forward, 5)                     \
  X(loom_model_vtable, flops_per_token, 7) X(loom_param_segment, shape, 5)                     \
  X(loom_param_group, segment_count, 4) X(loom_optimizer_step_args, step, 2)                   \
  X(loom_optimizer_vtable, step, 3) X(loom_optimizer_vtable, state_get, 5)                     \
  X(loom_optimizer_vtable, requirements, 6) X(loom_state_tensor, elementwise_group, 3)        \
  X(loom_host_api, unit_boundary, 13) X(loom_param_view, unit, 4)                              \
  X(loom_unit_boundary_args, input, 3) X(loom_unit_boundary_args, output, 4)                   \
  X(loom_schedule_vtable, factor, 3) X(loom_metric, value, 2) X(loom_metrics, count, 3)        \
  X(loom_tracker_vtable, log, 3) X(loom_tracker_vtable, note, 4)                               \
  X(loom_tracker_vtable, resume, 5) X(loom_tracker_vtable, state_load, 7)                      \
  X(loom_hook_vtable, state_load, 5)                                                           \
  X(loom_named_tensor, tensor, 2) X(loom_checkpoint_reader, on_metadata, 3)                    \
  X(loom_checkpoint_vtable, load, 4) X(loom_batch, add_field, 4)                              \
  X(loom_model_forward_args, field_count, 5) X(loom_batch_field, tensor, 2)                    \
  X(loom_model_forward_args, report_metric, 8) X(loom_batch, end_of_epoch, 5)                  \
  X(loom_dataset_vtable, info, 6) X(loom_dataset_info_args, batches_per_epoch, 1)            \
  X(loom_dataset_info_args, resumes_other_world_size, 2)                                       \
  X(loom_model_vtable, hugging_face, 9) X(loom_model_logits_args, logits, 4)                   \
  X(loom_model_hugging_face_args, json, 1) X(loom_model_vtable, decode, 10)                   \
  X(loom_model_decode_args, past, 2) X(loom_model_decode_args, logits, 3)                     \
  X(loom_tracker_vtable, finish, 8) X(loom_tracker_finish_args, outcome, 1)                    \
  X(loom_tracker_finish_args, step, 2) X(loom_tracker_finish_args, message, 3)                 \
  X(loom_optimizer_vtable, sparse_step, 7) X(loom_param_groups, sparse_table_count, 4)         \
  X(loom_sparse_table, weight, 2) X(loom_sparse_grad, values, 3)                               \
  X(loom_sparse_step_args, grad_count, 4) X(loom_context, adapters, 7)                         \
  X(loom_adapter_spec, rank, 3) X(loom_hook_vtable, needs, 6)                                 \
  X(loom_host_api, tensor_parallel_collective, 14) X(loom_param_view, split_dim, 5)            \
  X(loom_collective_args, input, 2) X(loom_collective_args, output, 3)                         \
  X(loom_collective_args, group, 4) X(loom_model_vtable, sequence_parallel, 11) \
  X(loom_param_view, split_blocks, 6) X(loom_model_vtable, expert_parallel, 12)             \
  X(loom_model_vtable, attributes, 13) X(loom_model_forward_args, layer_begin, 9)             \
  X(loom_model_forward_args, hidden_out, 12) X(loom_host_api, param_created, 15)              \
  X(loom_param_created_args, tensor, 2) X(loom_host_api, param_write, 16)                      \
  X(loom_param_write_args, value, 3) X(loom_optimizer_step_args, range_end, 5)

#ifdef __cplusplus
extern "C" {
#endif

/* Filled by abi_layout.c, i.e. as a C99 compiler lays the structs out. */
extern const size_t loom_c_struct_sizes[];      /* LOOM_ABI_STRUCTS order */
extern const size_t loom_c_struct_size_field[]; /* offsetof(T, struct_size), same order */
extern const size_t loom_c_frozen_offsets[];    /* LOOM_ABI_FROZEN_OFFSETS order */

#ifdef __cplusplus
}
#endif

#endif
