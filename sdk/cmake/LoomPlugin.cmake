# loom_add_plugin(NAME SOURCES src... [TORCH])
#
# Builds one plugin .so with the flags the ABI demands (docs/abi.md):
#  - hidden visibility and a version script, so loom_plugin_init is the only exported symbol;
#  - --no-undefined, so a missing symbol fails the build, not the run;
#  - --as-needed, so torch-free plugins never link LibTorch;
#  - TORCH: link LibTorch and record its CUDA version for the build fingerprint. In the installed
#    SDK that is Loom::torch, the host's own LibTorch by full path (LoomHostTorch.cmake); in the
#    source tree the `torch` target of find_package(Torch).
#
# The same file serves the source tree (included by the top-level CMakeLists.txt) and the
# installed SDK (included by LoomConfig.cmake, next to plugin.map). When LOOM_INSTALL_PLUGINS
# is true where loom_add_plugin is called, `cmake --install` puts the plugin into
# <prefix>/lib/loom/plugins, the folder an installed host searches by default.
include_guard(GLOBAL)

set(LOOM_PLUGIN_VERSION_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/plugin.map" CACHE INTERNAL "")

# Records LibTorch's CUDA version ("none" on CPU builds) for the fingerprint in loom/torch.hpp.
# find_package(Torch) may have run inside another function (loom_add_plugin), whose variables
# are gone by now, so the answer is kept in a global property.
function(loom_torch_fingerprint_definitions target)
  if(DEFINED CAFFE2_USE_CUDA)
    set(cuda none)
    if(CAFFE2_USE_CUDA AND CUDA_VERSION)
      set(cuda "${CUDA_VERSION}")
    endif()
    set_property(GLOBAL PROPERTY LOOM_TORCH_CUDA "${cuda}")
  else()
    get_property(cuda GLOBAL PROPERTY LOOM_TORCH_CUDA)
  endif()
  if(cuda AND NOT cuda STREQUAL "none")
    target_compile_definitions(${target} PRIVATE LOOM_TORCH_CUDA="${cuda}")
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
    INSTALL_RPATH_USE_LINK_PATH ON
    LINK_DEPENDS "${LOOM_PLUGIN_VERSION_SCRIPT}")
  if(NOT CMAKE_CXX_STANDARD)  # the C++ helpers need 17, LibTorch 2.13 and later 20
    set(standard 17)
    if(ARG_TORCH)
      set(standard 20)
    endif()
    set_target_properties(${name} PROPERTIES CXX_STANDARD ${standard} CXX_STANDARD_REQUIRED ON)
  endif()
  target_link_libraries(${name} PRIVATE Loom::sdk)
  target_link_options(${name} PRIVATE
    "LINKER:--version-script=${LOOM_PLUGIN_VERSION_SCRIPT}"
    "LINKER:--no-undefined"
    "LINKER:--as-needed")
  if(ARG_TORCH AND COMMAND loom_host_torch_target)  # installed SDK: exactly the host's LibTorch
    loom_host_torch_target()
    target_link_libraries(${name} PRIVATE Loom::torch)
    if(NOT LOOM_HOST_TORCH_CUDA STREQUAL "none")
      target_compile_definitions(${name} PRIVATE LOOM_TORCH_CUDA="${LOOM_HOST_TORCH_CUDA}")
    endif()
  elseif(ARG_TORCH)  # the source tree, which found LibTorch itself
    if(NOT TARGET torch)
      find_package(Torch REQUIRED)
    endif()
    target_link_libraries(${name} PRIVATE torch)
    loom_torch_fingerprint_definitions(${name})
    if(TARGET loom_torch_pch)  # source tree only: one precompiled <ATen/ATen.h> for all
      target_precompile_headers(${name} REUSE_FROM loom_torch_pch)
    endif()
  endif()
  if(LOOM_INSTALL_PLUGINS)
    install(TARGETS ${name} LIBRARY DESTINATION lib/loom/plugins)
  endif()
endfunction()
