// path_rows.hpp: PathRows, how a CUDA step computes the last layer's PaTH attention in sparse-label
// batches (train.path_rows): at the labelled rows only (the rows kernels, a serial chain over the
// keys per query and one CTA a head) or over every row (the blockwise kernels, then gathered).
// An execution choice: both compute the same function (up to rounding).
#pragma once

namespace sb {

// automatic: the rows kernels where a batch's B H heads fill at least half the device's SMs (fewer
// leave most of it idle while each chain walks every key: kernels/DESIGN.md); on: wherever the rows
// fit (kPathRowsMaxPerSeq a sequence); off: never.
enum class PathRows { automatic, on, off };

}  // namespace sb
