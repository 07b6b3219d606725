// torch_doctest.hpp: doctest for a test that also includes LibTorch; include it instead of
// <doctest/doctest.h>. LibTorch's logging (glog in Debian's 1.13, c10's own copy in the 2.x
// wheels) defines CHECK and CHECK_EQ/NE/LT/LE/GT/GE, and whichever header comes second
// silently takes those names: doctest's CHECK becomes a fatal glog check, or fails to compile
// with a comma in its argument. LibTorch goes first here (it is also the precompiled header),
// its macros go, and doctest's stay.
#pragma once

#include <ATen/ATen.h>

#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LT
#undef CHECK_LE
#undef CHECK_GT
#undef CHECK_GE

#include <doctest/doctest.h>
