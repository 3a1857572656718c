// table_parts.hpp: what the table builders (tables.cpp, table_grid.cpp, table_depth.cpp) and the
// renderer (table_render.cpp) share and the rest of the code does not need: labels and title words,
// the threshold in force, the seed columns of CSV blocks and CSV number texts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "report/tables.hpp"

namespace sb::report::parts {

std::string join(const std::vector<std::string>& items, const std::string& sep);
void append(std::vector<std::string>& to, const std::vector<std::string>& items);
// "L=64", with the settings bound to the length: "L=64 (num_kv_pairs=4)" (Study::length_keys).
std::string length_label(const Study& study, int64_t length);
// A note under the table when some settings are shown with L instead of in the model label.
void note_length_keys(const Study& study, Table& t);
// --threshold, else the manifest's, else 0.9.
double threshold_of(const Study& study, const TableOptions& o);
std::string spread_words(const std::string& spread);
// "12 runs: 10 failed, 2 diverged": the runs by status, for messages.
std::string status_counts(const Study& study);
// "; best learning rate per cell by mean M (of 0.001, 0.003)" when the grid compares rates.
std::string lr_words(const CellGrid& grid, const Metric& m);
std::string lr_suffix(const Cell& cell);  // " lr=0.001" for a cell with a chosen rate, else ""
// The fields shown for metric `m`: its own, then the companion accuracy when some run has it.
std::vector<Field> shown_fields(const Study& study, const Metric& m, const std::vector<std::string>& keys);
// Every seed of the study, in seed order ("0", "1", ...; runs without a seed by their id): the
// per-seed columns of CSV blocks ("seed 0", ...).
std::vector<std::string> study_seeds(const Study& study);
// CSV texts: "" for NaN, else 6 significant digits ("0.583333", "4.73186e-06"); integers as is.
std::string csv_number(double v);
std::string csv_integer(int64_t v);
// The learning rate of a cell's chosen runs: the best one where rates were compared, else the one
// its runs name (none without one).
std::optional<double> rate_of(const Cell& cell);
// The CSV lead of a cell: model, depth, L, the length-bound settings, and lr ("" without one).
std::vector<std::string> csv_lead(const Study& study, const std::string& model, int64_t depth, int64_t length,
                                  const Cell* cell);
std::vector<std::string> csv_lead_header(const Study& study);

}  // namespace sb::report::parts
