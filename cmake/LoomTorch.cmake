# cmake/LoomTorch.cmake: how Loom uses the LibTorch of a PyTorch wheel (its CMake package).
#
# Headers. PyTorch's include/ folder carries its own copies of libraries Loom also uses: fmt (v11 or
# later; spdlog is built on Debian's fmt 9) and google/protobuf (the TensorBoard tracker links
# Debian's libprotobuf). LibTorch's targets put that folder on the include path ahead of
# /usr/include, so the copies would shadow the system's headers, and which one a file gets
# would depend on include order. loom_hide_torch_vendored_headers() makes the question moot:
# every LibTorch target gets a folder in the build tree that links to each entry of PyTorch's
# include/ except those copies, in place of include/ itself.
set(LOOM_TORCH_VENDORED_HEADERS fmt google)

# In the list variable list_var, every entry equal to `from` becomes `to` (a plain string
# comparison: paths may hold regular-expression characters).
function(_loom_swap_dir list_var from to)
  set(out "")
  foreach(entry IN LISTS ${list_var})
    if(entry STREQUAL from)
      list(APPEND out "${to}")
    else()
      list(APPEND out "${entry}")
    endif()
  endforeach()
  set(${list_var} "${out}" PARENT_SCOPE)
endfunction()

function(loom_hide_torch_vendored_headers)
  get_target_property(c10_dirs c10 INTERFACE_INCLUDE_DIRECTORIES)
  set(torch_include "")
  foreach(dir IN LISTS c10_dirs)
    if(EXISTS "${dir}/c10/macros/Macros.h")
      set(torch_include "${dir}")
    endif()
  endforeach()
  if(NOT torch_include)
    message(FATAL_ERROR "Loom: cannot find LibTorch's include folder among c10's (${c10_dirs})")
  endif()
  set(filtered "${CMAKE_BINARY_DIR}/torch-include")
  file(REMOVE_RECURSE "${filtered}")
  file(MAKE_DIRECTORY "${filtered}")
  file(GLOB entries RELATIVE "${torch_include}" "${torch_include}/*")
  foreach(entry IN LISTS entries)
    if(NOT entry IN_LIST LOOM_TORCH_VENDORED_HEADERS)
      file(CREATE_LINK "${torch_include}/${entry}" "${filtered}/${entry}" SYMBOLIC)
    endif()
  endforeach()
  # Every imported LibTorch target that names the folder (c10, torch_cpu, torch, ... as each
  # PyTorch release arranges them).
  set(targets torch torch_library torch_cpu torch_cpu_library torch_cuda torch_cuda_library c10 c10_cuda
              caffe2::cudart caffe2::nvrtc)
  foreach(target IN LISTS targets)
    if(NOT TARGET ${target})
      continue()
    endif()
    get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
    if(dirs)
      _loom_swap_dir(dirs "${torch_include}" "${filtered}")
      set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${dirs}")
    endif()
  endforeach()
  set(dirs "${TORCH_INCLUDE_DIRS}")
  _loom_swap_dir(dirs "${torch_include}" "${filtered}")
  set(TORCH_INCLUDE_DIRS "${dirs}" PARENT_SCOPE)
  message(STATUS "Loom: LibTorch headers from ${torch_include} without its copies of ${LOOM_TORCH_VENDORED_HEADERS}")
endfunction()

# Linking. The wheel's libtorch.so exports its own copy of std::filesystem (64 symbols, built
# with the wheel's older toolchain). A program lists libtorch.so before libstdc++.so.6, so the
# loader bound every std::filesystem call in Loom to that copy, and the first
# std::filesystem::remove_all jumped to address 0 (seen in the tests with PyTorch 2.11).
# Everything that links LibTorch names libstdc++ first, so the system's copy serves Loom and
# LibTorch alike.
function(loom_link_libstdcxx_before_torch)
  set_property(TARGET torch APPEND PROPERTY INTERFACE_LINK_OPTIONS
    "SHELL:-Wl,--push-state,--no-as-needed -lstdc++ -Wl,--pop-state")
endfunction()
