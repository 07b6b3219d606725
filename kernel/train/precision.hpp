// precision.hpp: the arithmetic a run computes in (run.precision). No LibTorch here, so the
// manifest code can name it; device.hpp applies it.
#pragma once

#include <string>

namespace loom {

enum class Precision { fp32, tf32, bf16 };

// Throws a usage Failure naming `where` for anything but "fp32", "tf32" or "bf16".
Precision parse_precision(const std::string& name, const std::string& where);
const char* precision_name(Precision precision);

}  // namespace loom
