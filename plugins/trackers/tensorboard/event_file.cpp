// event_file.cpp: CRC-32C, TFRecord framing and the append-only event file.
#include "event_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <loom/plugin.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace loom_tb {
namespace {

// Byte-at-a-time table for the reflected Castagnoli polynomial.
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}

std::string errno_text(int err) { return std::strerror(err); }

// The largest <t> among "events.out.tfevents.<t>.*" files in dir; -1 when there are none.
long long newest_time_field(const std::string& dir) {
  static const std::string prefix = "events.out.tfevents.";
  long long newest = -1;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    const long long t = std::strtoll(name.c_str() + prefix.size(), &end, 10);
    if (end != name.c_str() + prefix.size() && *end == '.' && t > newest) newest = t;
  }
  return newest;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string name = buf;
  for (char& c : name)
    if (c == '/') c = '_';  // a file name, whatever the host is called
  return name;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto& table = crc_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xffu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

void append_record(std::string& out, const std::string& data) {
  std::string length;
  put_le(length, data.size(), 8);
  out += length;
  put_le(out, masked_crc32c(length.data(), length.size()), 4);
  out += data;
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
}

EventFile::EventFile(const std::string& dir) {
  const long long now = static_cast<long long>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  long long t = std::max(now, newest_time_field(dir) + 1);
  const std::string suffix = "." + host_name() + "." + std::to_string(::getpid()) + ".loom";
  for (int attempt = 0; attempt < 100; ++attempt, ++t) {  // O_EXCL: never share a file
    path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(t) + suffix)).string();
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ >= 0) return;
    if (errno != EEXIST) break;
  }
  throw loom::Error("tensorboard: cannot create '" + path_ + "': " + errno_text(errno));
}

EventFile::~EventFile() {
  if (fd_ >= 0) ::close(fd_);
}

void EventFile::append(const std::string& framed) {
  size_t done = 0;
  while (done < framed.size()) {
    const ssize_t n = ::write(fd_, framed.data() + done, framed.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      if (::ftruncate(fd_, static_cast<off_t>(size_)) == 0) ::lseek(fd_, static_cast<off_t>(size_), SEEK_SET);
      throw loom::Error("tensorboard: cannot write '" + path_ + "': " + errno_text(err), LOOM_STATUS_CODE_INTERNAL);
    }
    done += static_cast<size_t>(n);
  }
  size_ += framed.size();
}

}  // namespace loom_tb
