// export_run.hpp: `statebench export`: a finished run's parameters as a safetensors file (each
// tensor under its statebench name, float32) with the model, task and config in its metadata, and
// optionally a check file of examples and their logits from the float64 CPU model, which
// tools/check_export.py compares with the PyTorch reference model (docs/run-format.md, "Export").
#pragma once
#include <cstdint>
#include <string>

#include "tasks/registry.hpp"

namespace sb {

struct ExportOptions {
  std::string out;             // the .safetensors file (written atomically)
  std::string check_data;      // "" = none; else a .safetensors file of examples and their logits
  int64_t check_examples = 4;  // examples in the check file
  std::string check_split;     // "" = the run's first task.eval split
  int64_t check_length = 0;    // 0 = the training length; else through the task's length parameter
};

struct ExportResult {
  int64_t tensors = 0, params = 0, vocab = 0;
  int64_t check_examples = 0, check_length = 0;
};

// sb::Error (nothing written) for an unfinished run, an unknown task or split, or an unwritable
// output.
ExportResult export_run(const std::string& dir, const TaskRegistry& tasks, const ExportOptions& options);

}  // namespace sb
