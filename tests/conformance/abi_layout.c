/* abi_layout.c: the C99 side of the layout comparison in abi_layout_test.cpp. This file is
 * compiled as strict C99; it records sizeof and offsetof exactly as a C plugin sees them. */
#include "abi_layout.h"

#define LOOM_SIZE_OF(T) sizeof(T),
#define LOOM_STRUCT_SIZE_AT(T) offsetof(T, struct_size),
#define LOOM_OFFSET_OF(T, field, slot) offsetof(T, field),

const size_t loom_c_struct_sizes[] = {LOOM_ABI_STRUCTS(LOOM_SIZE_OF) 0};
const size_t loom_c_struct_size_field[] = {LOOM_ABI_STRUCTS(LOOM_STRUCT_SIZE_AT) 0};
const size_t loom_c_frozen_offsets[] = {LOOM_ABI_FROZEN_OFFSETS(LOOM_OFFSET_OF) 0};
