// event_file.hpp: one TensorBoard event file on disk, in TFRecord framing. Knows nothing of
// protobuf: it frames and appends the bytes it is given.
//
// TFRecord framing (the public format of tensorflow/core/lib/io/record_writer.cc), each
// record:   uint64 length (little-endian) | uint32 masked_crc32c(length bytes)
//         | data[length]                 | uint32 masked_crc32c(data)
// with masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8, c = CRC-32C(x) (Castagnoli,
// reflected polynomial 0x82F63B78), all arithmetic on uint32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom_tb {

uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);

// Appends `data` to `out` as one framed record.
void append_record(std::string& out, const std::string& data);

class EventFile {
 public:
  // Creates a new file events.out.tfevents.<unix time>.<hostname>.<pid>.loom in dir (which
  // must exist). Its name sorts after every event file already there, as TensorBoard reads
  // a folder's files in name order: the time field is raised past theirs when needed.
  explicit EventFile(const std::string& dir);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  const std::string& path() const { return path_; }
  // Writes framed records with one write(2) (nothing stays buffered in the process). On
  // failure the file is cut back to its previous size, so it never ends in half a record,
  // and loom::Error is thrown.
  void append(const std::string& framed);

 private:
  int fd_ = -1;
  std::string path_;
  uint64_t size_ = 0;  // bytes of whole records written so far
};

}  // namespace loom_tb
