// example_meta.hpp: what a file of generated examples is, so it can be read without statebench:
// the task and its parameters, the split, seed and indices, the shapes and the vocabulary (token
// id i is vocab[i]). `generate` writes it as a sidecar JSON (FILE.meta.json) beside every output
// and, in an .npz, also as the members vocab.npy (a [V] string array) and meta.npy (this JSON as a
// 0-d string array). docs/run-format.md ("Generated data") lists the fields.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/example_writer.hpp"
#include "tasks/task.hpp"

namespace sb {

struct ExampleFileInfo {
  std::string task;                                        // registry name
  std::vector<std::pair<std::string, std::string>> params;  // effective values, in declaration order
  std::string split;
  uint64_t seed = 0, start = 0;  // examples start .. start+count-1
  int64_t count = 0;
  ExampleFormat format = ExampleFormat::kJsonl;
};

// The metadata as pretty-printed JSON text.
std::string example_meta_json(const Task& task, const ExampleFileInfo& info);

// The sidecar's path for a data file: FILE.meta.json.
std::string example_meta_path(const std::string& data_path);

// The extra .npz members: vocab (the token names) and meta (example_meta_json).
NpzExtras example_meta_npz_members(const Task& task, const std::string& meta_json);

}  // namespace sb
