// output_dir.cpp: checking and creating output directories (see output_dir.hpp).
#include "io/output_dir.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace sb {

namespace fs = std::filesystem;

void check_output_dir(const std::string& dir, const std::string& what) {
  if (dir.empty()) fail("{}: no directory given", what);
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) fail("{} '{}': {}", what, dir, ec.message());
  // The directory itself, else its nearest existing ancestor, must be a writable directory.
  for (fs::path at = p;; at = at.parent_path()) {
    const fs::file_status st = fs::status(at, ec);
    if (fs::exists(st)) {
      if (!fs::is_directory(st)) {
        if (at == p) fail("{} '{}': exists and is not a directory", what, dir);
        fail("{} '{}': '{}' is not a directory", what, dir, at.string());
      }
      if (::access(at.c_str(), W_OK | X_OK) != 0) {
        if (at == p) fail("{} '{}': not writable", what, dir);
        fail("{} '{}': cannot be created ('{}' is not writable)", what, dir, at.string());
      }
      return;
    }
    if (at == at.parent_path()) fail("{} '{}': no existing parent directory", what, dir);
  }
}

void create_output_dir(const std::string& dir, const std::string& what) {
  check_output_dir(dir, what);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    fail("{} '{}': cannot create it: {}", what, dir, ec ? ec.message() : "not a directory");
}

}  // namespace sb
