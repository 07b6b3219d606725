# HostTorchExport.cmake (Loom's own build, not installed): writes LoomHostTorch.cmake, which
# tells the installed SDK exactly which LibTorch the host was built with, file by file.
#
# Why not find_package(Torch) in a plugin project: LibTorch's CMake package enables the CUDA
# language, which needs nvcc and fails with CMake older than 3.26 once the project asks for
# C++20 (`CUDA20` is unknown there); and its find_library calls search the system folders
# before LibTorch's own, so a second LibTorch (Debian's libtorch-dev) wins. The installed SDK
# instead gets an imported target that names the host's libraries by full path, with the
# include folders, definitions and options LibTorch's `torch` target carries.
include_guard(GLOBAL)

# Appends to the global list property `prop` the entries of `values` that hold no generator
# expression. Those that do are resolved by the walk (below) or refused by name.
function(_loom_torch_append prop)
  foreach(value IN LISTS ARGN)
    if(value AND NOT value MATCHES "-NOTFOUND$")
      set_property(GLOBAL APPEND PROPERTY ${prop} "${value}")
    endif()
  endforeach()
endfunction()

# The file an imported library target links to (its Release location, or any configuration's).
function(_loom_torch_location target out)
  set(location "")
  foreach(prop IMPORTED_LOCATION_RELEASE IMPORTED_LOCATION)
    get_target_property(location ${target} ${prop})
    if(location)
      break()
    endif()
  endforeach()
  if(NOT location)
    get_target_property(configs ${target} IMPORTED_CONFIGURATIONS)
    foreach(config IN LISTS configs)
      get_target_property(location ${target} IMPORTED_LOCATION_${config})
      if(location)
        break()
      endif()
    endforeach()
  endif()
  set(${out} "${location}" PARENT_SCOPE)
endfunction()

# Everything linking `target` brings along, depth first, each target once.
function(_loom_torch_walk target)
  get_property(seen GLOBAL PROPERTY _LOOM_TORCH_SEEN)
  if(target IN_LIST seen)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY _LOOM_TORCH_SEEN "${target}")
  get_target_property(type ${target} TYPE)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    _loom_torch_location(${target} location)
    if(NOT location)
      message(FATAL_ERROR "Loom: LibTorch's target ${target} names no library file; cannot describe it to the installed SDK")
    endif()
    _loom_torch_append(_LOOM_TORCH_LIBS "${location}")
  endif()
  foreach(kind INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS LINK_OPTIONS)
    get_target_property(values ${target} INTERFACE_${kind})
    set(plain "")
    foreach(value IN LISTS values)
      if(value MATCHES "^\\$<TARGET_PROPERTY:([^,>]+),INTERFACE_${kind}>$")
        _loom_torch_walk(${CMAKE_MATCH_1})  # a *_library wrapper: the wrapped target's own
      elseif(value MATCHES "\\$<")
        message(FATAL_ERROR "Loom: cannot describe ${target}'s INTERFACE_${kind} entry `${value}` to the installed SDK")
      else()
        list(APPEND plain "${value}")
      endif()
    endforeach()
    _loom_torch_append(_LOOM_TORCH_${kind} ${plain})
  endforeach()
  get_target_property(links ${target} INTERFACE_LINK_LIBRARIES)
  foreach(item IN LISTS links)
    # One branch per pattern: CMake's if() does not stop at the first true condition of an OR,
    # and a later failed MATCHES clears CMAKE_MATCH_1.
    if(item MATCHES "^\\$<TARGET_PROPERTY:([^,>]+),INTERFACE_LINK_LIBRARIES>$")
      _loom_torch_walk(${CMAKE_MATCH_1})
    elseif(item MATCHES "^\\$<LINK_ONLY:([^>]+)>$")
      _loom_torch_walk(${CMAKE_MATCH_1})
    elseif(item MATCHES "\\$<TARGET_FILE:([^>]+)>")  # -Wl,--no-as-needed,"$<TARGET_FILE:x>" ...
      _loom_torch_walk(${CMAKE_MATCH_1})
    elseif(item MATCHES "\\$<")
      message(FATAL_ERROR "Loom: cannot describe ${target}'s link entry `${item}` to the installed SDK")
    elseif(TARGET ${item})
      _loom_torch_walk(${item})
    elseif(item MATCHES "^-")
      _loom_torch_append(_LOOM_TORCH_LINK_OPTIONS "${item}")
    elseif(item)
      _loom_torch_append(_LOOM_TORCH_LIBS "${item}")  # a full path or a system library's name
    endif()
  endforeach()
endfunction()

# A CMake list literal of `values` with `root` written as <TORCH> (so the SDK can find the
# same LibTorch elsewhere) and the build tree's filtered include folder as LibTorch's own.
function(_loom_torch_list out root build_include real_include)
  set(text "")
  list(REMOVE_DUPLICATES ARGN)
  foreach(value IN LISTS ARGN)
    if(value STREQUAL build_include)
      set(value "${real_include}")
    endif()
    string(FIND "${value}" "${root}/" at)
    if(at EQUAL 0)
      string(LENGTH "${root}" length)
      string(SUBSTRING "${value}" ${length} -1 rest)
      set(value "<TORCH>${rest}")
    endif()
    string(REPLACE "\\" "\\\\" value "${value}")
    string(REPLACE "\"" "\\\"" value "${value}")
    string(APPEND text "\n  \"${value}\"")
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# loom_write_host_torch(FILE): LoomHostTorch.cmake for the installed SDK. Needs the `torch`
# target, TORCH_INSTALL_PREFIX and, from tools/dev, LOOM_PYTHON (for the pip line and the
# prefix's own Python environment, lib/loom/python).
function(loom_write_host_torch file)
  set_property(GLOBAL PROPERTY _LOOM_TORCH_SEEN "")
  foreach(kind LIBS INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS LINK_OPTIONS)
    set_property(GLOBAL PROPERTY _LOOM_TORCH_${kind} "")
  endforeach()
  _loom_torch_walk(torch)
  get_filename_component(root "${TORCH_INSTALL_PREFIX}" ABSOLUTE)
  set(real_include "${root}/include")
  set(build_include "${CMAKE_BINARY_DIR}/torch-include")  # loom_hide_torch_vendored_headers
  foreach(kind LIBS INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS LINK_OPTIONS)
    get_property(values GLOBAL PROPERTY _LOOM_TORCH_${kind})
    _loom_torch_list(list_${kind} "${root}" "${build_include}" "${real_include}" ${values})
  endforeach()

  # Where the prefix's own copy goes (tools/dev install) and the line that makes it.
  set(version "${Torch_VERSION}")
  set(index "")
  set(prefix_torch "")
  if(LOOM_PYTHON)
    execute_process(
      COMMAND "${LOOM_PYTHON}" -c "import sys, importlib.metadata as m; print(m.version('torch')); print('lib/python%d.%d/site-packages' % sys.version_info[:2])"
      OUTPUT_VARIABLE answer RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0)
      string(REPLACE "\n" ";" answer "${answer}")
      list(GET answer 0 full_version)
      list(GET answer 1 site)
      if(full_version MATCHES "^([^+]+)\\+(.+)$")  # 2.11.0+cu130 came from PyTorch's own index
        set(version "${CMAKE_MATCH_1}")
        set(index " --index-url https://download.pytorch.org/whl/${CMAKE_MATCH_2}")
      else()
        set(version "${full_version}")
      endif()
      set(prefix_torch "lib/loom/python/${site}/torch")
    endif()
  endif()
  set(LOOM_TORCH_PIN "torch==${version}${index}")
  set(LOOM_TORCH_PREFIX_COPY "${prefix_torch}")
  set(LOOM_TORCH_BUILD_ROOT "${root}")
  set(LOOM_TORCH_LIBS "${list_LIBS}")
  set(LOOM_TORCH_INCLUDE_DIRECTORIES "${list_INCLUDE_DIRECTORIES}")
  set(LOOM_TORCH_COMPILE_DEFINITIONS "${list_COMPILE_DEFINITIONS}")
  set(LOOM_TORCH_COMPILE_OPTIONS "${list_COMPILE_OPTIONS}")
  set(LOOM_TORCH_LINK_OPTIONS "${list_LINK_OPTIONS}")
  set(LOOM_HOST_TORCH_CUDA none)
  if(CAFFE2_USE_CUDA AND CUDA_VERSION)
    set(LOOM_HOST_TORCH_CUDA "${CUDA_VERSION}")
  endif()
  configure_file("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/LoomHostTorch.cmake.in" "${file}" @ONLY)
  set(LOOM_TORCH_PREFIX_COPY "${prefix_torch}" PARENT_SCOPE)
endfunction()
