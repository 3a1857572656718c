// table_render.cpp: Markdown (padded pipe tables under a headline of run counts) and CSV (one
// block per table: a "# title" line, header, rows, "# note" lines) rendering of tables.hpp's Tables.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "report/tables.hpp"

namespace sb::report {

namespace {

// Display width: UTF-8 code points.
size_t display_width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string md_escape(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

}  // namespace

// ---- rendering ----------------------------------------------------------------------------------

std::string render_markdown(const Study& study, const std::vector<Table>& tables) {
  std::map<std::string, int> counts;
  for (const RunRecord& r : study.runs) ++counts[to_string(r.status)];
  std::vector<std::string> parts;
  for (RunStatus s : {RunStatus::completed, RunStatus::early_stopped, RunStatus::diverged, RunStatus::failed,
                      RunStatus::unfinished, RunStatus::missing, RunStatus::unreadable})
    if (counts[to_string(s)]) parts.push_back(fmt::format("{} {}", counts[to_string(s)], to_string(s)));
  std::string out = fmt::format("# {}\n\n", study.info.name);
  out += fmt::format("{} run{}{}: {}.\n", study.runs.size(), study.runs.size() == 1 ? "" : "s",
                     study.info.protocol.empty() ? "" : " (protocol " + study.info.protocol + ")", join(parts, ", "));
  for (const Table& t : tables) {
    out += "\n## " + t.title + "\n\n";
    std::vector<size_t> width(t.header.size(), 3);
    for (size_t c = 0; c < t.header.size(); ++c) width[c] = std::max(width[c], display_width(md_escape(t.header[c])));
    for (const auto& row : t.rows)
      for (size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], display_width(md_escape(row[c])));
    auto line = [&](const std::vector<std::string>& cells) {
      std::string s = "|";
      for (size_t c = 0; c < width.size(); ++c) {
        const std::string cell = c < cells.size() ? md_escape(cells[c]) : "";
        s += ' ';
        s += cell;
        s.append(width[c] - display_width(cell), ' ');
        s += " |";
      }
      return s + "\n";
    };
    out += line(t.header);
    std::string rule = "|";
    for (size_t w : width) {
      rule += ' ';
      rule.append(w, '-');
      rule += " |";
    }
    out += rule + "\n";
    for (const auto& row : t.rows) out += line(row);
    if (!t.notes.empty()) out += "\n";
    for (const auto& n : t.notes) out += n + "\n";
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string render_csv(const std::vector<Table>& tables) {
  std::string out;
  auto line = [](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c) s += ',';
      s += csv_field(cells[c]);
    }
    return s + "\n";
  };
  for (size_t i = 0; i < tables.size(); ++i) {
    const Table& t = tables[i];
    if (i) out += "\n";
    out += csv_field("# " + t.title) + "\n";
    out += line(t.header);
    for (const auto& row : t.rows) out += line(row);
    for (const auto& n : t.notes) out += csv_field("# " + n) + "\n";
  }
  return out;
}

}  // namespace sb::report
