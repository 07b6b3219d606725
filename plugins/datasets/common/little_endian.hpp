// little_endian.hpp: fixed-width little-endian integers in byte buffers, for the files and
// state records Loom writes. Loads compile to plain moves on little-endian machines.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace loom::data {

template <class U>
U load_le(const void* p) {
  unsigned char b[sizeof(U)];
  std::memcpy(b, p, sizeof(U));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  U v;
  std::memcpy(&v, b, sizeof(U));
  return v;
#else
  U v = 0;
  for (size_t i = 0; i < sizeof(U); ++i) v |= U(b[i]) << (8 * i);
  return v;
#endif
}

template <class U>
void append_le(std::string& out, U v) {
  for (size_t i = 0; i < sizeof(U); ++i) out.push_back(char((uint64_t(v) >> (8 * i)) & 0xFF));
}

}  // namespace loom::data
