// cli_run.hpp: helpers for tests that run the statebench binary (SB_CLI_PATH) as a subprocess:
// spawn with captured stdout/stderr, exit codes, scratch directories, the library's own examples
// to compare with, and small readers for what `generate` writes (JSONL int arrays, .npy, zip
// fields) including a CRC-32 independent of the library's.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/atomic_file.hpp"
#include "tasks/registry.hpp"

namespace sb::test {

namespace fs = std::filesystem;

struct CliResult {
  int rc = -1;
  std::string out, err;
};

inline fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(SB_TEST_TMP) / ("cli_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Starts the CLI with stdout/stderr redirected to files (or stderr to `stderr_fd` if >= 0),
// without plugins from the environment.
inline pid_t spawn_cli(const std::vector<std::string>& args, const fs::path& out, const fs::path& err,
                       int stderr_fd = -1) {
  std::vector<std::string> argv_s{SB_CLI_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    ::unsetenv("STATEBENCH_PLUGIN_PATH");  // only the built-in tasks, as in registry() below
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = stderr_fd >= 0 ? stderr_fd : ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) _exit(120);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execv(argv[0], argv.data());
    _exit(121);
  }
  return pid;
}

inline int wait_exit_code(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Captured output lives apart from the directories whose contents the tests check.
inline fs::path capture_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::path(SB_TEST_TMP) / ("cli_capture_" + std::to_string(::getpid()));
    fs::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(fs::path(SB_TEST_TMP) / ("cli_capture_" + std::to_string(::getpid())), ec);
    });
    return d;
  }();
  return dir;
}

inline CliResult run_cli(const std::vector<std::string>& args) {
  const fs::path out = capture_dir() / "stdout", err = capture_dir() / "stderr";
  CliResult r;
  r.rc = wait_exit_code(spawn_cli(args, out, err));
  r.out = read_file(out.string());
  r.err = read_file(err.string());
  return r;
}

inline std::string show(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += a + " ";
  return s;
}

inline TaskRegistry& registry() {
  static TaskRegistry reg = [] {
    TaskRegistry r;
    register_builtin_tasks(r);
    return r;
  }();
  return reg;
}

inline std::map<std::string, std::string> dir_contents(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    out[e.path().filename().string()] = e.is_regular_file() ? read_file(e.path().string()) : std::string("<dir>");
  return out;
}

// ---- a tiny JSON reader for {"key":[int,...],...} lines ------------------------------------------

using IntArrays = std::map<std::string, std::vector<int64_t>>;

inline IntArrays parse_int_arrays(const std::string& line) {
  size_t i = 0;
  auto expect = [&](char c) {
    if (i >= line.size() || line[i] != c) throw std::runtime_error(std::string("expected '") + c + "' at " + std::to_string(i));
    ++i;
  };
  IntArrays out;
  expect('{');
  for (;;) {
    expect('"');
    const size_t close = line.find('"', i);
    if (close == std::string::npos) throw std::runtime_error("unterminated key");
    const std::string key = line.substr(i, close - i);
    i = close + 1;
    expect(':');
    expect('[');
    std::vector<int64_t>& values = out[key];
    while (line[i] != ']') {
      if (!values.empty()) expect(',');
      size_t used = 0;
      values.push_back(std::stoll(line.substr(i, 24), &used));
      i += used;
    }
    expect(']');
    if (line[i] == '}') break;
    expect(',');
  }
  expect('}');
  if (i != line.size()) throw std::runtime_error("trailing characters");
  return out;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// ---- binary helpers --------------------------------------------------------------------------------

inline uint32_t le32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(b.at(at + static_cast<size_t>(k)));
  return v;
}
inline uint32_t le16(const std::string& b, size_t at) {
  return static_cast<unsigned char>(b.at(at)) | static_cast<uint32_t>(static_cast<unsigned char>(b.at(at + 1))) << 8;
}

inline uint32_t reference_crc32(const char* data, size_t n) {  // bit-at-a-time, independent of the library
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t j = 0; j < n; ++j) {
    crc ^= static_cast<unsigned char>(data[j]);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// Checks a .npy blob's header (int32, C order, `shape`) and returns its payload as int32.
inline std::vector<int32_t> read_npy(const std::string& b, const std::string& shape) {
  EXPECT_EQ(b.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = le16(b, 8);
  const std::string dict = b.substr(10, header_len);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_NE(dict.find("'descr': '<i4'"), std::string::npos) << dict;
  EXPECT_NE(dict.find("'fortran_order': False"), std::string::npos) << dict;
  EXPECT_NE(dict.find("'shape': " + shape), std::string::npos) << dict;
  std::vector<int32_t> v((b.size() - 10 - header_len) / 4);
  std::memcpy(v.data(), b.data() + 10 + header_len, v.size() * 4);
  return v;
}

struct Expected {
  std::vector<Example> examples;
  int64_t T = 0;
};

inline Expected library_examples(const std::string& task, const std::map<std::string, std::string>& params,
                                 const std::string& split, uint64_t seed, uint64_t start, int64_t n) {
  const auto t = registry().create(task, params);
  Expected e;
  e.T = t->seq_len();
  for (int64_t i = 0; i < n; ++i) e.examples.push_back(t->example(split, seed, start + static_cast<uint64_t>(i)));
  return e;
}

template <class A, class B>
inline bool same(const A& a, const B& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](auto x, auto y) { return x == y; });
}

}  // namespace sb::test
