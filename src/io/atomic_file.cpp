// atomic_file.cpp: temp-file + fsync + rename writes, and whole-file reads (see atomic_file.hpp).
#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <zlib.h>

#include "core/error.hpp"

namespace sb {

namespace {
std::string temp_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return fmt::format("{}.tmp.{}.{}", path, static_cast<long>(::getpid()), counter++);
}

void fsync_dir(const std::string& path) {
  const auto dir = std::filesystem::path(path).parent_path();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}
}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_path_(temp_name(path_)) {
  if (path_.empty()) fail("empty output file name");
  // The rename at commit() would replace whatever is there: refuse devices, pipes and the like
  // (as root, `--out /dev/null` would otherwise turn /dev/null into a regular file).
  std::error_code ec;
  const auto status = std::filesystem::status(path_, ec);
  if (!ec && std::filesystem::is_directory(status)) fail("cannot write '{}': it is a directory", path_);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    fail("cannot write '{}': it exists and is not a regular file", path_);
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!file_) fail("cannot write '{}': {}", path_, std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (file_) std::fclose(file_);
  if (!committed_) std::remove(tmp_path_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  if (!file_) fail("write to '{}' after commit", path_);
  if (bytes && std::fwrite(data, 1, bytes, file_) != bytes) fail("cannot write '{}': {}", path_, std::strerror(errno));
}

void AtomicFile::commit() {
  if (!file_) fail("'{}' committed twice", path_);
  const bool ok = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  const int err = errno;
  std::fclose(file_);
  file_ = nullptr;
  if (!ok) fail("cannot write '{}': {}", path_, std::strerror(err));
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) fail("cannot write '{}': {}", path_, std::strerror(errno));
  committed_ = true;
  fsync_dir(path_);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '{}': {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string read_file_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) fail("cannot read '{}': {}", path, std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  int code = 0;
  const std::string why = n < 0 ? gzerror(f, &code) : "";
  gzclose(f);
  if (n < 0) fail("'{}': cannot decompress ({})", path, why);
  return out;
}

}  // namespace sb
