// atomic_file.hpp: files that appear whole or not at all. Writes go to a temporary file in the
// target's directory, are flushed and fsync'ed, then renamed over the target. A writer destroyed
// before commit() removes its temporary file, so an error never leaves a partial output behind.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace sb {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // throws sb::Error if the directory is not writable
  ~AtomicFile();                          // discards the temporary file unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);  // throws sb::Error on a short write
  void write(std::string_view text) { write(text.data(), text.size()); }
  void commit();  // flush, fsync, rename over the target; throws sb::Error on failure
  const std::string& path() const { return path_; }

 private:
  std::string path_, tmp_path_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

// Writes `bytes` to `path` atomically.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Reads a whole file; throws sb::Error naming the file if it cannot be read.
std::string read_file(const std::string& path);
// The same, decompressed when the file is gzip (zlib reads a plain file as it is).
std::string read_file_gzip(const std::string& path);

}  // namespace sb
