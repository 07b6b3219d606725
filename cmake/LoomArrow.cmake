# cmake/LoomArrow.cmake: Apache Arrow's C++ libraries (libarrow, libparquet) from the pyarrow
# wheel, the way LibTorch comes from torch's: the wheel ships the shared libraries and their
# headers, but no CMake package, so this asks the Python that has it where they lie.
#
#   LOOM_ARROW = ON    the libraries must be found (tools/dev: .venv has the pinned pyarrow)
#   LOOM_ARROW = AUTO  use them when that Python has pyarrow, else build without (the GPU
#                      machine's own Python: tools/dev --torch-from-python)
#   LOOM_ARROW = OFF   build without them
# Without them the Parquet and Arrow readers (tables/), the `parquet` dataset and the tests of
# both are left out, and `host data inspect` says so.
#
# Defines LOOM_HAVE_ARROW and, when set, the imported targets Loom::arrow and Loom::parquet.
set(LOOM_ARROW "AUTO" CACHE STRING "Parquet and Arrow support from pyarrow's libraries: ON, AUTO or OFF")
set_property(CACHE LOOM_ARROW PROPERTY STRINGS ON AUTO OFF)
set(LOOM_HAVE_ARROW OFF)

function(_loom_arrow_missing why)
  if(LOOM_ARROW STREQUAL "ON")
    message(FATAL_ERROR "Loom: LOOM_ARROW=ON but ${why}. tools/dev installs the pinned pyarrow "
                        "(tools/python-requirements.txt) into .venv/; or configure with -DLOOM_ARROW=OFF")
  endif()
  message(STATUS "Loom: building without Parquet and Arrow support: ${why}")
endfunction()

if(NOT LOOM_ARROW STREQUAL "OFF")
  set(_loom_arrow_python "${LOOM_PYTHON}")
  if(NOT _loom_arrow_python)
    find_program(_loom_arrow_python python3)
  endif()
  execute_process(
    COMMAND "${_loom_arrow_python}" -c "import os, pyarrow; print(os.path.dirname(pyarrow.__file__)); print(pyarrow.__version__)"
    OUTPUT_VARIABLE _loom_arrow_out RESULT_VARIABLE _loom_arrow_rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _loom_arrow_rc EQUAL 0)
    _loom_arrow_missing("${_loom_arrow_python} cannot import pyarrow")
  else()
    string(REPLACE "\n" ";" _loom_arrow_out "${_loom_arrow_out}")
    list(GET _loom_arrow_out 0 LOOM_ARROW_DIR)
    list(GET _loom_arrow_out 1 LOOM_ARROW_VERSION)
    # The wheel names its libraries by SONAME only (libarrow.so.2600), one version each.
    file(GLOB _loom_libarrow "${LOOM_ARROW_DIR}/libarrow.so.[0-9]*")
    file(GLOB _loom_libparquet "${LOOM_ARROW_DIR}/libparquet.so.[0-9]*")
    list(LENGTH _loom_libarrow _loom_n_arrow)
    list(LENGTH _loom_libparquet _loom_n_parquet)
    if(NOT _loom_n_arrow EQUAL 1 OR NOT _loom_n_parquet EQUAL 1 OR NOT EXISTS "${LOOM_ARROW_DIR}/include/parquet/api/reader.h")
      _loom_arrow_missing("pyarrow ${LOOM_ARROW_VERSION} in ${LOOM_ARROW_DIR} does not hold exactly one libarrow.so.N, one libparquet.so.N and include/parquet")
    else()
      set(LOOM_HAVE_ARROW ON)
      add_library(Loom::arrow SHARED IMPORTED GLOBAL)
      set_target_properties(Loom::arrow PROPERTIES IMPORTED_LOCATION "${_loom_libarrow}"
                            INTERFACE_INCLUDE_DIRECTORIES "${LOOM_ARROW_DIR}/include")
      add_library(Loom::parquet SHARED IMPORTED GLOBAL)
      set_target_properties(Loom::parquet PROPERTIES IMPORTED_LOCATION "${_loom_libparquet}"
                            INTERFACE_LINK_LIBRARIES Loom::arrow)
      # Installed binaries find them where the build did (the wheel's folder), as with LibTorch.
      list(APPEND CMAKE_INSTALL_RPATH "${LOOM_ARROW_DIR}")
      message(STATUS "Loom: Parquet and Arrow from pyarrow ${LOOM_ARROW_VERSION} (${LOOM_ARROW_DIR})")
    endif()
  endif()
endif()
