// study_plots.hpp: the figures of a study (tables.hpp's cells drawn with plot.hpp): one heatmap
// per model (depth x train length, mean over seeds of the metric, colour scale 0..1), or one of
// model x train length when every model has a single depth, and, when
// runs were evaluated at other lengths (eval keys "SPLIT@LENGTH"), one line plot per model of the
// metric against evaluation length with a line per depth.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "report/plot.hpp"
#include "report/tables.hpp"

namespace sb::report {

HeatmapSpec heatmap_spec(const Study& study, const Metric& metric, const CellGrid& grid, const std::string& model);
// When every model has a single depth (MQAR, MQRAR): one heatmap of model x train length, the
// first model on top; std::nullopt otherwise.
std::optional<HeatmapSpec> models_heatmap_spec(const Study& study, const Metric& metric, const CellGrid& grid);
// std::nullopt when the model has no "@LENGTH" evaluation of the metric's split.
std::optional<LinePlotSpec> length_plot_spec(const Study& study, const Metric& metric, const CellGrid& grid,
                                             const std::string& model);
// A file-name-safe form of a model label ("path+rope (d_model=128)" -> "path_rope_d_model_128").
std::string file_stem(const std::string& model);
// Writes DIR/heatmap_<model>.svg (or, when every model has one depth, DIR/heatmap_models.svg) and
// DIR/length_<model>.svg; creates DIR; returns the files written.
std::vector<std::string> write_study_plots(const Study& study, const TableOptions& options, const std::string& dir);

}  // namespace sb::report
