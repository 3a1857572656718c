// packed_cells.hpp: a study's cell summaries packed in one gzip file, DIR/cells.jsonl.gz (what
// results/ keeps instead of a cells/<id>/ folder per cell): one line per cell, {"id": ID,
// "summary": S} with S a summary.json object (docs/run-format.md); an uncompressed DIR/cells.jsonl
// (older exports) is read the same way. The study loader (results.cpp) takes a cell's summary from
// here before it looks for cells/<id>/summary.json. docs/tables.md, "What is read".
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "io/json.hpp"

namespace sb::report {

inline constexpr const char* kPackedCellsFile = "cells.jsonl.gz";
inline constexpr const char* kPackedCellsPlainFile = "cells.jsonl";

struct PackedCell {
  size_t line = 0;  // 1-based line in the file
  Json summary;     // the "summary" object, keys in file order
};

struct PackedCells {
  std::string file;                         // the path read ("" when the study has none)
  std::map<std::string, PackedCell> cells;  // by id
  std::vector<std::string> order;           // ids in file order
  // "FILE line N (cell ID)": where a cell's summary was read, for warnings and errors.
  std::string where(const std::string& id) const;
};

// Reads `file` (gzip or plain). A blank line is skipped. sb::Error naming the file and line for a line that is not
// a JSON object with a string "id" and an object "summary" (unless !strict: then it is skipped
// with a warning into `warnings`), and for an id given twice (always: which one would count?).
PackedCells read_packed_cells(const std::string& file, bool strict, std::vector<std::string>& warnings);

}  // namespace sb::report
