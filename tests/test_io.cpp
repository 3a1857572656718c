// test_io.cpp: the example writers (JSONL, .npy, .npz and its entries' CRC-32), the .npy header,
// the parallel generate loop (same bytes for any thread count, errors and cancellation) and Progress.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/example_writer.hpp"
#include "io/generate_examples.hpp"
#include "io/progress.hpp"
#include "tasks/registry.hpp"

namespace fs = std::filesystem;
using namespace sb;

namespace {

// Bit-at-a-time CRC-32, independent of zlib's (which the .npz writer uses).
uint32_t reference_crc32(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(SB_TEST_TMP) / ("io_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

size_t entries(const fs::path& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

std::unique_ptr<Task> flipflop(int length) {
  TaskRegistry reg;
  register_builtin_tasks(reg);
  return reg.create("flipflop", {{"length", std::to_string(length)}});
}

// Synthetic examples: [count, T] arrays with recognisable values.
struct Batch {
  std::vector<int32_t> ids, labels;
  std::vector<uint8_t> mask;
  Batch(int64_t count, int64_t T) {
    for (int64_t i = 0; i < count * T; ++i) {
      ids.push_back(static_cast<int32_t>(i * 7 % 1000));
      labels.push_back(i % 3 == 0 ? kIgnoreLabel : static_cast<int32_t>(i % 50));
      mask.push_back(static_cast<uint8_t>(i % 3 != 0 && i % 2 == 0));
    }
  }
};

std::string write_batch(const fs::path& path, ExampleFormat format, const Batch& b, int64_t count, int64_t T,
                        int64_t per_call) {
  auto w = open_example_writer(path.string(), format, count, T);
  for (int64_t i = 0; i < count; i += per_call) {
    const int64_t n = std::min(per_call, count - i);
    w->write(n, b.ids.data() + i * T, b.labels.data() + i * T, b.mask.data() + i * T);
  }
  w->commit();
  return read_file(path.string());
}

// Collects everything written, for comparing with the library's examples.
class MemoryWriter final : public ExampleWriter {
 public:
  void write(int64_t count, const int32_t* ids, const int32_t* labels, const uint8_t* mask) override {
    calls++;
    examples += count;
    const size_t n = static_cast<size_t>(count) * static_cast<size_t>(T);
    all_ids.insert(all_ids.end(), ids, ids + n);
    all_labels.insert(all_labels.end(), labels, labels + n);
    all_mask.insert(all_mask.end(), mask, mask + n);
  }
  void commit() override {}
  int64_t T = 0, examples = 0, calls = 0;
  std::vector<int32_t> all_ids, all_labels;
  std::vector<uint8_t> all_mask;
};

// A task whose draw() throws for one example index, to test error propagation from workers.
class FailingTask final : public Task {
 public:
  explicit FailingTask(uint64_t bad) : bad_(bad) {}
  std::string name() const override { return "failing"; }
  int64_t seq_len() const override { return 64; }
  std::vector<std::string> vocab() const override { return {"a", "b"}; }
  void sample(int, Rng& rng, ExampleView out) const override {
    for (int t = 0; t < 64; ++t) {
      out.input_ids[t] = static_cast<int32_t>(rng.below(2));
      out.labels[t] = out.input_ids[t];
      out.score_mask[t] = 1;
    }
  }
  void draw(int split, uint64_t key, uint64_t index, uint32_t attempt, ExampleView out) const override {
    if (index == bad_) fail("example {} is broken", index);
    Task::draw(split, key, index, attempt, out);
  }

 private:
  uint64_t bad_;
};

}  // namespace

TEST(NpyHeader, AlignedDictWithShape) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{5}, {3, 2, 7}, {123456789, 3, 512}}) {
    const std::string h = npy_header(shape);
    ASSERT_EQ(h.size() % 64, 0u);
    EXPECT_EQ(h.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const size_t len = static_cast<unsigned char>(h[8]) | static_cast<unsigned char>(h[9]) << 8;
    EXPECT_EQ(len + 10, h.size());
    EXPECT_EQ(h.back(), '\n');
    EXPECT_NE(h.find("'descr': '<i4'"), std::string::npos);
    EXPECT_NE(h.find("'fortran_order': False"), std::string::npos);
  }
  EXPECT_NE(npy_header({5}).find("'shape': (5,)"), std::string::npos);
  EXPECT_NE(npy_header({3, 2, 7}).find("'shape': (3, 2, 7)"), std::string::npos);
}

TEST(ExampleFormat, ByNameAndExtension) {
  EXPECT_EQ(parse_example_format("jsonl"), ExampleFormat::kJsonl);
  EXPECT_EQ(parse_example_format("npy"), ExampleFormat::kNpy);
  EXPECT_EQ(parse_example_format("npz"), ExampleFormat::kNpz);
  EXPECT_EQ(example_format_for_path("a/b.json"), ExampleFormat::kJsonl);
  EXPECT_EQ(example_format_for_path("x.jsonl"), ExampleFormat::kJsonl);
  EXPECT_EQ(example_format_for_path("x.npy"), ExampleFormat::kNpy);
  EXPECT_EQ(example_format_for_path("x.npz"), ExampleFormat::kNpz);
  EXPECT_THROW(parse_example_format("csv"), Error);
  EXPECT_THROW(example_format_for_path("x.txt"), Error);
  EXPECT_THROW(example_format_for_path("noext"), Error);
}

TEST(ExampleWriter, JsonlLayout) {
  const auto dir = fresh_dir("jsonl");
  const int32_t ids[] = {1, 2, 3, 4, 5, 6}, labels[] = {2, 3, -100, 5, 6, -100};
  const uint8_t mask[] = {0, 1, 0, 1, 1, 0};
  auto w = open_example_writer((dir / "a.jsonl").string(), ExampleFormat::kJsonl, 2, 3);
  w->write(2, ids, labels, mask);
  w->commit();
  EXPECT_EQ(read_file((dir / "a.jsonl").string()),
            "{\"input_ids\":[1,2,3],\"labels\":[2,3,-100],\"score_mask\":[0,1,0]}\n"
            "{\"input_ids\":[4,5,6],\"labels\":[5,6,-100],\"score_mask\":[1,1,0]}\n");
}

TEST(ExampleWriter, BytesDoNotDependOnCallGrouping) {
  const auto dir = fresh_dir("grouping");
  const int64_t N = 13, T = 5;
  const Batch b(N, T);
  for (auto format : {ExampleFormat::kJsonl, ExampleFormat::kNpy, ExampleFormat::kNpz}) {
    const std::string one = write_batch(dir / "one", format, b, N, T, N);
    const std::string many = write_batch(dir / "many", format, b, N, T, 3);
    EXPECT_EQ(one, many) << example_format_name(format);
    EXPECT_GT(one.size(), static_cast<size_t>(N * T)) << example_format_name(format);
  }
}

// The .npz entries carry zlib's CRC-32 of their bytes, accumulated over the writer's calls: checked
// against a bit-at-a-time CRC-32 of each stored entry (local headers and the central directory).
TEST(ExampleWriter, NpzEntriesCarryTheCrcOfTheirBytes) {
  const auto dir = fresh_dir("npz_crc");
  const int64_t N = 37, T = 11;  // 1628 payload bytes per entry, written 5 examples at a time
  const Batch b(N, T);
  const std::string z = write_batch(dir / "a.npz", ExampleFormat::kNpz, b, N, T, 5);
  const auto le = [&](size_t at, int bytes) {
    uint32_t v = 0;
    for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(z.at(at + static_cast<size_t>(k)));
    return v;
  };
  const size_t eocd = z.size() - 22;
  ASSERT_EQ(le(eocd, 4), 0x06054b50u);
  size_t central = le(eocd + 16, 4);
  for (int m = 0; m < 3; ++m) {
    ASSERT_EQ(le(central, 4), 0x02014b50u);
    const uint32_t crc = le(central + 16, 4), size = le(central + 20, 4);
    const size_t local = le(central + 42, 4), name = le(central + 28, 2);
    ASSERT_EQ(le(local, 4), 0x04034b50u);
    EXPECT_EQ(le(local + 14, 4), crc);
    const std::string entry = z.substr(local + 30 + le(local + 26, 2) + le(local + 28, 2), size);
    EXPECT_EQ(crc, reference_crc32(entry)) << m;
    EXPECT_EQ(entry.substr(0, 6), "\x93NUMPY");
    central += 46 + name;
  }
}

TEST(ExampleWriter, NpyPayloadIsInterleavedPerExample) {
  const auto dir = fresh_dir("npy");
  const int64_t N = 4, T = 6;
  const Batch b(N, T);
  const std::string bytes = write_batch(dir / "a.npy", ExampleFormat::kNpy, b, N, T, 1);
  const std::string header = npy_header({N, 3, T});
  ASSERT_EQ(bytes.size(), header.size() + static_cast<size_t>(N * 3 * T * 4));
  EXPECT_EQ(bytes.substr(0, header.size()), header);
  std::vector<int32_t> payload(static_cast<size_t>(N * 3 * T));
  std::memcpy(payload.data(), bytes.data() + header.size(), payload.size() * 4);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(payload[(i * 3 + 0) * T + t], b.ids[i * T + t]);
      EXPECT_EQ(payload[(i * 3 + 1) * T + t], b.labels[i * T + t]);
      EXPECT_EQ(payload[(i * 3 + 2) * T + t], b.mask[i * T + t]);
    }
}

TEST(ExampleWriter, NoFileWithoutCommitOrWithWrongCount) {
  const auto dir = fresh_dir("uncommitted");
  const Batch b(3, 4);
  for (auto format : {ExampleFormat::kJsonl, ExampleFormat::kNpy, ExampleFormat::kNpz}) {
    {
      auto w = open_example_writer((dir / "a").string(), format, 3, 4);
      w->write(2, b.ids.data(), b.labels.data(), b.mask.data());
      EXPECT_GT(entries(dir), 0u);  // the temporary file exists meanwhile
    }
    EXPECT_EQ(entries(dir), 0u) << example_format_name(format);
    {
      auto w = open_example_writer((dir / "a").string(), format, 3, 4);
      w->write(2, b.ids.data(), b.labels.data(), b.mask.data());
      EXPECT_THROW(w->commit(), Error);  // 2 of 3 examples
      EXPECT_THROW(w->write(2, b.ids.data(), b.labels.data(), b.mask.data()), Error);  // 4 of 3
    }
    EXPECT_EQ(entries(dir), 0u) << example_format_name(format);
  }
}

TEST(ExampleWriter, RefusesUnwritableTargets) {
  const auto dir = fresh_dir("targets");
  fs::create_directory(dir / "sub.jsonl");
  EXPECT_THROW(open_example_writer((dir / "sub.jsonl").string(), ExampleFormat::kJsonl, 1, 4), Error);
  EXPECT_THROW(open_example_writer((dir / "missing" / "a.npy").string(), ExampleFormat::kNpy, 1, 4), Error);
  EXPECT_THROW(open_example_writer("/dev/null", ExampleFormat::kNpy, 1, 4), Error);
  // An npz over 4 GiB is refused before anything is written.
  EXPECT_THROW(open_example_writer((dir / "big.npz").string(), ExampleFormat::kNpz, int64_t{1} << 20, 1024), Error);
  EXPECT_EQ(entries(dir), 1u);  // only sub.jsonl
}

// Every atomic write (tables, summaries, manifests, bench JSON) renames over its target, so a
// device or pipe there is refused rather than replaced by a regular file; a directory too.
TEST(AtomicFile, RefusesTargetsThatAreNotRegularFiles) {
  const auto dir = fresh_dir("atomic_targets");
  const auto fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  try {
    write_file_atomic(fifo.string(), "x");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a regular file"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_THROW(AtomicFile((dir).string()), Error);
  write_file_atomic((dir / "plain.txt").string(), "a");  // a regular file is replaced, as always
  write_file_atomic((dir / "plain.txt").string(), "b");
  EXPECT_EQ(read_file((dir / "plain.txt").string()), "b");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 2);  // no temp files left
}

TEST(GenerateExamples, SameExamplesForEveryThreadCount) {
  const auto task = flipflop(64);
  const int64_t T = 64, per_chunk = generate_chunk_examples(T);
  const GenerateRange range{1, 3, 17, 3 * per_chunk + 5};  // split val, several chunks and a partial one
  MemoryWriter ref;
  ref.T = T;
  generate_examples(*task, range, 1, ref);
  ASSERT_EQ(ref.examples, range.count);
  EXPECT_EQ(ref.calls, 4);
  for (int64_t i : {int64_t{0}, per_chunk, range.count - 1}) {
    const Example ex = task->example("val", 3, range.start + static_cast<uint64_t>(i));
    EXPECT_TRUE(std::equal(ex.input_ids.begin(), ex.input_ids.end(), ref.all_ids.begin() + i * T));
    EXPECT_TRUE(std::equal(ex.labels.begin(), ex.labels.end(), ref.all_labels.begin() + i * T));
    EXPECT_TRUE(std::equal(ex.score_mask.begin(), ex.score_mask.end(), ref.all_mask.begin() + i * T));
  }
  for (int threads : {2, 3, 8}) {
    MemoryWriter w;
    w.T = T;
    generate_examples(*task, range, threads, w);
    EXPECT_EQ(w.all_ids, ref.all_ids) << threads;
    EXPECT_EQ(w.all_labels, ref.all_labels) << threads;
    EXPECT_EQ(w.all_mask, ref.all_mask) << threads;
  }
}

TEST(GenerateExamples, WorkerErrorsReachTheCaller) {
  const int64_t per_chunk = generate_chunk_examples(64);
  const FailingTask task(static_cast<uint64_t>(2 * per_chunk + 3));
  for (int threads : {1, 3}) {
    MemoryWriter w;
    w.T = 64;
    try {
      generate_examples(task, {0, 0, 0, 6 * per_chunk}, threads, w);
      ADD_FAILURE() << "no error with " << threads << " threads";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is broken"), std::string::npos);
    }
    EXPECT_LE(w.examples, 2 * per_chunk);  // nothing at or after the broken chunk was written
  }
}

TEST(GenerateExamples, CancelStopsWithError) {
  const auto task = flipflop(16);
  std::atomic<bool> cancel{true};
  for (int threads : {1, 2}) {
    MemoryWriter w;
    w.T = 16;
    EXPECT_THROW(generate_examples(*task, {0, 0, 0, 100000}, threads, w, nullptr, &cancel), Error);
    EXPECT_EQ(w.examples, 0);
  }
}

TEST(Progress, PlainBarAndSilentModes) {
  const auto dir = fresh_dir("progress");
  auto capture = [&](ProgressMode mode) {
    const auto path = dir / "out.txt";
    std::FILE* f = std::fopen(path.c_str(), "w");
    {
      Progress p("job", 100, mode, f, "items");
      for (int i = 0; i <= 100; i += 10) p.update(i);
      p.finish();
    }
    std::fclose(f);
    return read_file(path.string());
  };
  EXPECT_EQ(capture(ProgressMode::kSilent), "");
  EXPECT_EQ(capture(ProgressMode::kAuto), "");  // a file is not a terminal
  const std::string plain = capture(ProgressMode::kPlain);
  EXPECT_NE(plain.find("job 100% 100/100 items"), std::string::npos) << plain;
  EXPECT_EQ(plain.find('\r'), std::string::npos);
  const std::string bar = capture(ProgressMode::kBar);
  EXPECT_EQ(bar.front(), '\r');
  EXPECT_NE(bar.find("100%"), std::string::npos) << bar;
  EXPECT_NE(bar.find("[==============================]"), std::string::npos) << bar;
  EXPECT_EQ(bar.back(), '\n');
  EXPECT_EQ(human_count(950), "950");
  EXPECT_EQ(human_count(12300), "12.3k");
  EXPECT_EQ(human_count(4.5e6), "4.5M");
  EXPECT_EQ(human_duration(4.25), "4.2s");
  EXPECT_EQ(human_duration(125), "2m05s");
  EXPECT_EQ(human_duration(3720), "1h02m");
}

TEST(Progress, OneEtaFromThisProcessesRateAndOneFinalLine) {
  const auto dir = fresh_dir("progress_eta");
  const auto path = dir / "out.txt";
  std::FILE* f = std::fopen(path.c_str(), "w");
  {
    Progress p("job", 100, ProgressMode::kBar, f, "steps");
    p.set_start(40);  // resumed at 40: the rate counts only what this process did
    p.set_note("loss 0.5");
    p.update(41);     // the first update draws
    p.finish(60);     // stopped early: the final line says where
  }
  std::fclose(f);
  const std::string bar = read_file(path.string());
  EXPECT_NE(bar.find("41/100 steps"), std::string::npos) << bar;
  EXPECT_EQ(bar.find(" eta "), bar.rfind(" eta ")) << bar;  // one ETA, on the running line only
  EXPECT_NE(bar.find(" eta "), std::string::npos) << bar;
  EXPECT_NE(bar.find("60% 60/100 steps"), std::string::npos) << bar;
  EXPECT_NE(bar.find("loss 0.5"), std::string::npos) << bar;

  // Plain mode prints lines: a final update at the total is the final line, not repeated.
  std::FILE* g = std::fopen(path.c_str(), "w");
  {
    Progress p("job", 10, ProgressMode::kPlain, g, "steps");
    std::this_thread::sleep_for(std::chrono::milliseconds(1050));  // plain lines are at least 1 s apart
    p.update(10);
    p.finish();
  }
  std::fclose(g);
  const std::string plain = read_file(path.string());
  EXPECT_EQ(plain.find("100% 10/10"), plain.rfind("100% 10/10")) << plain;
  EXPECT_EQ(std::count(plain.begin(), plain.end(), '\n'), 1) << plain;
}
