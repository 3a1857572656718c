// packed_cells.cpp: reading DIR/cells.jsonl.gz (see packed_cells.hpp): one JSON object per line,
// checked for its "id" and "summary", indexed by id.
#include "report/packed_cells.hpp"

#include <fmt/format.h>

#include <sstream>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace sb::report {

std::string PackedCells::where(const std::string& id) const {
  const auto it = cells.find(id);
  return fmt::format("'{}' line {} (cell {})", file, it == cells.end() ? 0 : it->second.line, id);
}

PackedCells read_packed_cells(const std::string& file, bool strict, std::vector<std::string>& warnings) {
  PackedCells out;
  out.file = file;
  std::istringstream in(read_file_gzip(file));
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string why, id;
    Json j;
    try {
      j = parse_json(line);
    } catch (const Error& e) {
      why = e.what();
    }
    if (why.empty()) {
      const Json* id_field = json_field(j, "id");
      const Json* summary = json_field(j, "summary");
      if (!j.is_object()) why = "expected a JSON object {\"id\": ..., \"summary\": {...}}";
      else if (!id_field || !id_field->is_string() || id_field->get<std::string>().empty()) why = "no string \"id\"";
      else if (!summary || !summary->is_object()) why = "no object \"summary\"";
      if (why.empty()) {
        id = id_field->get<std::string>();
        if (const auto it = out.cells.find(id); it != out.cells.end())
          fail("'{}' line {}: cell '{}' is given twice (first on line {})", file, n, id, it->second.line);
        out.cells.emplace(id, PackedCell{n, *summary});
        out.order.push_back(id);
        continue;
      }
    }
    const std::string message = fmt::format("'{}' line {}: {}", file, n, why);
    if (strict) fail("{}", message);
    warnings.push_back("skipping " + message);
  }
  return out;
}

}  // namespace sb::report
