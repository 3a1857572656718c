// table_render.cpp: cell texts (numbers, mean ± spread, error counts with bounds, percentages) and
// Markdown (padded pipe tables under a headline of run counts) and CSV (one block per table: a
// "# title" line, the numeric header and rows, "# note" lines) rendering of tables.hpp's Tables.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "report/table_parts.hpp"
#include "report/tables.hpp"

namespace sb::report {

namespace {

// Display width: UTF-8 code points.
size_t display_width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string md_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r' || c == '\t') out += ' ';  // one table row per line
    else out += c;
  }
  return out;
}

}  // namespace

// ---- formatting ---------------------------------------------------------------------------------

std::string format_number(double v, Field field) {
  if (std::isnan(v)) return "-";
  return field == Field::loss ? fmt::format("{:.4g}", v) : fmt::format("{:.3f}", v);
}

std::string format_stats(const Stats& s, Field field, const std::string& spread) {
  if (s.n == 0) return "-";
  const std::string mean = format_number(s.mean, field);
  if (s.n == 1) return fmt::format("{} (1)", mean);
  if (spread == "range")
    return fmt::format("{} [{}, {}] ({})", mean, format_number(s.min, field), format_number(s.max, field), s.n);
  return fmt::format("{} ± {} ({})", mean, format_number(s.sd, field), s.n);
}

std::string format_cell(const CellValue& v, Field field, const std::string& spread) {
  if (v.stats.n == 0) {
    if (v.diverged && v.failed) return "div/fail";
    if (v.diverged) return "div";
    if (v.failed) return "fail";
    return "-";
  }
  std::string out = format_stats(v.stats, field, spread);
  if (v.diverged) out += fmt::format(" [{} div]", v.diverged);
  if (v.failed) out += fmt::format(" [{} fail]", v.failed);
  return out;
}

std::string format_percent(double fraction) {
  if (std::isnan(fraction)) return "-";
  const double p = fraction * 100;
  if (p == 0) return "0";
  if (p >= 10) return fmt::format("{:.1f}", p);
  if (p >= 1) return fmt::format("{:.2f}", p);
  const int decimals = std::min(12, 2 - static_cast<int>(std::floor(std::log10(p))));
  return fmt::format("{:.{}f}", p, decimals);
}

std::string format_errors(int64_t errors, int64_t scored, const Interval& bound) {
  const double rate = scored > 0 ? static_cast<double>(errors) / static_cast<double>(scored) : kNaN;
  return fmt::format("{}/{} = {}% [{}%, {}%]", errors, scored, format_percent(rate), format_percent(bound.lo),
                     format_percent(bound.hi));
}

// ---- rendering ----------------------------------------------------------------------------------

std::string render_markdown(const Study& study, const std::vector<Table>& tables) {
  std::map<std::string, int> counts;
  for (const RunRecord& r : study.runs) ++counts[to_string(r.status)];
  std::vector<std::string> by_status;
  for (RunStatus s : {RunStatus::completed, RunStatus::early_stopped, RunStatus::diverged, RunStatus::failed,
                      RunStatus::unfinished, RunStatus::missing, RunStatus::skipped, RunStatus::unreadable})
    if (counts[to_string(s)]) by_status.push_back(fmt::format("{} {}", counts[to_string(s)], to_string(s)));
  std::string out = fmt::format("# {}\n\n", study.info.name);
  out += fmt::format("{} run{}{}: {}.\n", study.runs.size(), study.runs.size() == 1 ? "" : "s",
                     study.info.protocol.empty() ? "" : " (protocol " + study.info.protocol + ")", parts::join(by_status, ", "));
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
    const bool numeric = !t.csv_header.empty();
    out += line(numeric ? t.csv_header : t.header);
    for (const auto& row : numeric ? t.csv_rows : t.rows) out += line(row);
    for (const auto& n : t.notes) out += csv_field("# " + n) + "\n";
  }
  return out;
}

}  // namespace sb::report
