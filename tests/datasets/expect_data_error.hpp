// expect_data_error.hpp: what the dataset unit tests expect of a bad input.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "plugins/datasets/common/data_error.hpp"
#include "run_host.hpp"

namespace loom_test {

// The message of the bad-input DataError fn throws ("" when it throws none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const loom::data::DataError& e) {
    CHECK(e.kind() == loom::data::DataError::Kind::bad_input);
    return e.what();
  }
  return "";
}

}  // namespace loom_test
