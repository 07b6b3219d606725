# loom_add_plugin(NAME SOURCES src... [TORCH])
#
# Builds one plugin .so with the flags the ABI demands (docs/abi.md):
#  - hidden visibility and a version script, so loom_plugin_init is the only exported symbol;
#  - --no-undefined, so a missing symbol fails the build, not the run;
#  - --as-needed, so torch-free plugins never link LibTorch;
#  - TORCH: link LibTorch and record its CUDA version for the build fingerprint.
include_guard(GLOBAL)

set(LOOM_PLUGIN_VERSION_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/plugin.map" CACHE INTERNAL "")

# Records LibTorch's CUDA version ("none" on CPU builds) for the fingerprint in loom/torch.hpp.
function(loom_torch_fingerprint_definitions target)
  if(CAFFE2_USE_CUDA AND CUDA_VERSION)
    target_compile_definitions(${target} PRIVATE LOOM_TORCH_CUDA="${CUDA_VERSION}")
  endif()
endfunction()

function(loom_add_plugin name)
  cmake_parse_arguments(ARG "TORCH" "" "SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "loom_add_plugin(${name}): give SOURCES")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  set_property(GLOBAL APPEND PROPERTY LOOM_PLUGIN_TARGETS ${name})
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS "${LOOM_PLUGIN_VERSION_SCRIPT}")
  target_link_libraries(${name} PRIVATE Loom::sdk)
  target_link_options(${name} PRIVATE
    "LINKER:--version-script=${LOOM_PLUGIN_VERSION_SCRIPT}"
    "LINKER:--no-undefined"
    "LINKER:--as-needed")
  if(ARG_TORCH)
    if(NOT TARGET torch)
      find_package(Torch REQUIRED)
    endif()
    target_link_libraries(${name} PRIVATE torch)
    loom_torch_fingerprint_definitions(${name})
    if(TARGET loom_torch_pch)
      target_precompile_headers(${name} REUSE_FROM loom_torch_pch)
    endif()
  endif()
endfunction()
