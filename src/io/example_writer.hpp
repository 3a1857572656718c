// example_writer.hpp: writes task examples to files other frameworks read.
//   jsonl: one object per line: {"input_ids":[...],"labels":[...],"score_mask":[...]}
//   npy:   ONE little-endian int32 array of shape [N, 3, T]; axis 1 is (input_ids, labels,
//          score_mask), so x[:, 0] are the inputs, x[:, 1] the labels (-100 = no loss), x[:, 2] the mask
//   npz:   an uncompressed zip laid out like numpy.savez: input_ids.npy, labels.npy and
//          score_mask.npy, each int32 [N, T] (no ZIP64: at most 4 GiB in all), then any extra
//          members the caller passes (generate adds vocab.npy and meta.npy: io/example_meta.hpp)
// Output goes through AtomicFile: a writer destroyed before commit() leaves no file behind.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sb {

enum class ExampleFormat { kJsonl, kNpy, kNpz };

// "jsonl" (or "json"), "npy", "npz"; anything else is an sb::Error naming it.
ExampleFormat parse_example_format(const std::string& name);
// By the extension of `path`: .jsonl/.json, .npy, .npz; an unknown extension is an sb::Error.
ExampleFormat example_format_for_path(const std::string& path);
const char* example_format_name(ExampleFormat format);

class ExampleWriter {
 public:
  virtual ~ExampleWriter() = default;  // without commit(): nothing is left on disk
  // Appends `count` examples. The bytes written do not depend on how examples are grouped
  // into calls, only on the examples and their order.
  virtual void write(int64_t count,
                     const int32_t* input_ids,    // [count, T]
                     const int32_t* labels,       // [count, T]
                     const uint8_t* score_mask)   // [count, T]
      = 0;
  // After exactly N examples: finishes the file and renames it into place. Throws sb::Error if
  // the count is not N or the file cannot be written.
  virtual void commit() = 0;
};

// Extra .npz members, written after the three arrays: (name without ".npy", a whole .npy file).
using NpzExtras = std::vector<std::pair<std::string, std::string>>;

// Opens `path` for N examples of length T. Throws sb::Error (naming the path) if it cannot be
// written: missing directory, a directory, no permission; for npz also if it would exceed 4 GiB.
std::unique_ptr<ExampleWriter> open_example_writer(const std::string& path, ExampleFormat format,
                                                   int64_t N, int64_t T, NpzExtras npz_extras = {});

// The .npy (format 1.0) header for a C-order array: magic, version, length, the dict padded with
// spaces and a final '\n' to a multiple of 64 bytes. descr e.g. "<i4".
std::string npy_header(const std::vector<int64_t>& shape, const std::string& descr = "<i4");

// A whole .npy of unicode strings as NumPy writes str arrays (dtype '<U' + the longest length in
// code points, UTF-32LE): a 1-D array of `strings`, or with `scalar` a 0-d array of strings[0].
// Invalid UTF-8 becomes U+FFFD.
std::string npy_unicode(const std::vector<std::string>& strings, bool scalar = false);

}  // namespace sb
