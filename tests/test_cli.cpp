// test_cli.cpp: runs the real statebench binary (SB_CLI_PATH) as a subprocess: `tasks`, `tasks
// show`, `generate` (JSONL / .npy / .npz contents against the library's examples, thread-count
// independence, --start), every bad-input path (exit 2, one stderr line, no file left behind),
// Ctrl-C during generation, the progress bar on a terminal only, and `bench tasks`.
#include <poll.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "core/error.hpp"
#include "cli_run.hpp"
#include "io/json.hpp"

using namespace sb;
using namespace sb::test;

TEST(CliTasks, ListsEveryRegisteredTask) {
  const CliResult r = run_cli({"tasks"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.rfind("name", 0), 0u) << r.out;
  bool flipflop = false;
  for (const TaskInfo* info : registry().list()) {
    bool found = false;
    for (const auto& l : lines_of(r.out))
      if (l.rfind(info->name + " ", 0) == 0 && l.find(info->summary) != std::string::npos &&
          l.find(info->origin) != std::string::npos)
        found = true;
    EXPECT_TRUE(found) << info->name << "\n" << r.out;
    flipflop |= info->name == "flipflop";
  }
  EXPECT_TRUE(flipflop);
}

TEST(CliTasks, ShowPrintsParametersVocabularySplitsAndDetails) {
  const CliResult r = run_cli({"tasks", "show", "flipflop", "--param", "length=16", "-p", "p_ignore=0.5"});
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* want : {"flipflop: ", "parameters:", "length    512      16 *", "p_ignore  0.8      0.5 *", "p_write",
                           "sequence length T: 16", "vocabulary: V=5", "0=w  1=r  2=i  3=0  4=1", "splits:", "train   train",
                           "sparse  eval", "details:", "score mask"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

bool creatable_at_defaults(const TaskInfo& info) {
  try {
    registry().create(info.name, {});
    return true;
  } catch (const sb::Error&) {
    return false;
  }
}

TEST(CliTasks, ShowWorksForEveryTaskAndAbbreviatesLongVocabularies) {
  for (const TaskInfo* info : registry().list()) {
    if (!creatable_at_defaults(*info)) {  // shows its parameters and why it cannot be built
      const CliResult r = run_cli({"tasks", "show", info->name});
      EXPECT_EQ(r.rc, 0) << info->name << ": " << r.err;
      EXPECT_NE(r.out.find("not instantiated at its defaults"), std::string::npos) << r.out;
      continue;
    }
    const auto task = info->create(Params("task", info->params, {}));
    const auto vocab = task->vocab();
    const CliResult r = run_cli({"tasks", "show", info->name});
    ASSERT_EQ(r.rc, 0) << info->name << ": " << r.err;
    const size_t V = vocab.size();
    EXPECT_NE(r.out.find("vocabulary: V=" + std::to_string(V)), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("sequence length T: " + std::to_string(task->seq_len())), std::string::npos);
    EXPECT_NE(r.out.find("  0="), std::string::npos);
    EXPECT_NE(r.out.find(" " + std::to_string(V - 1) + "="), std::string::npos);
    if (V > 32) {
      EXPECT_NE(r.out.find("(" + std::to_string(V - 16) + " more)"), std::string::npos) << r.out;
      EXPECT_EQ(r.out.find("  8="), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("  7="), std::string::npos) << r.out;
    }
    for (const auto& split : task->splits()) EXPECT_NE(r.out.find(split.name), std::string::npos);
  }
}

TEST(CliGenerate, JsonlMatchesLibraryExamples) {
  const auto dir = fresh_dir("jsonl");
  const auto path = (dir / "ff.jsonl").string();
  const CliResult r = run_cli({"generate", "flipflop", "-p", "length=16", "--split", "val", "--seed", "7", "-n", "20",
                               "--start", "5", "-o", path, "--threads", "2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("wrote 20 examples"), std::string::npos);
  const Expected e = library_examples("flipflop", {{"length", "16"}}, "val", 7, 5, 20);
  const auto lines = lines_of(read_file(path));
  ASSERT_EQ(lines.size(), 20u);
  for (size_t i = 0; i < lines.size(); ++i) {
    const IntArrays a = parse_int_arrays(lines[i]);
    ASSERT_EQ(a.size(), 3u) << lines[i];
    EXPECT_TRUE(same(a.at("input_ids"), e.examples[i].input_ids)) << i;
    EXPECT_TRUE(same(a.at("labels"), e.examples[i].labels)) << i;
    EXPECT_TRUE(same(a.at("score_mask"), e.examples[i].score_mask)) << i;
  }
  EXPECT_EQ(dir_contents(dir).size(), 2u);  // the data and its sidecar, ff.jsonl.meta.json
}

TEST(CliGenerate, SidecarSaysWhatTheFileIs) {
  const auto dir = fresh_dir("sidecar");
  for (const char* ext : {"jsonl", "npy", "npz"}) {
    const auto path = (dir / (std::string("wp.") + ext)).string();
    const CliResult r = run_cli({"generate", "word_problem", "-p", "group=S3", "-p", "length=5", "--split", "val",
                                 "--seed", "4", "--start", "2", "-n", "3", "-o", path});
    ASSERT_EQ(r.rc, 0) << r.err;
    const Json meta = parse_json(read_file(path + ".meta.json"));
    const auto task = registry().create("word_problem", {{"group", "S3"}, {"length", "5"}});
    EXPECT_EQ(meta["format"], "statebench-examples");
    EXPECT_EQ(meta["task"], "word_problem");
    EXPECT_EQ(meta["params"]["group"], "S3");
    EXPECT_EQ(meta["params"]["length"], "5");
    EXPECT_EQ(meta["params"]["labels"], "prefix");  // defaults are written too
    EXPECT_EQ(meta["split"], "val");
    EXPECT_EQ(meta["split_kind"], "eval");
    EXPECT_EQ(meta["seed"], 4);
    EXPECT_EQ(meta["start"], 2);
    EXPECT_EQ(meta["count"], 3);
    EXPECT_EQ(meta["seq_len"], task->seq_len());
    EXPECT_EQ(meta["vocab"].get<std::vector<std::string>>(), task->vocab());
    EXPECT_EQ(meta["vocab_size"], task->vocab_size());
    EXPECT_EQ(meta["ignore_label"], -100);
  }
  // A failed generate leaves neither file.
  const auto bad = (dir / "bad.jsonl").string();
  EXPECT_EQ(run_cli({"generate", "word_problem", "-p", "group=S3", "--split", "nosuch", "-n", "3", "-o", bad}).rc, 2);
  EXPECT_FALSE(fs::exists(bad));
  EXPECT_FALSE(fs::exists(bad + ".meta.json"));
}

TEST(CliGenerate, EveryTaskAtDefaultsMatchesLibrary) {
  const auto dir = fresh_dir("defaults");
  for (const TaskInfo* info : registry().list()) {
    if (!creatable_at_defaults(*info)) continue;  // e.g. automaton needs a file
    const auto path = (dir / (info->name + ".json")).string();  // .json selects JSONL too
    const CliResult r = run_cli({"generate", info->name, "-n", "3", "-o", path, "--seed", "1"});
    ASSERT_EQ(r.rc, 0) << info->name << ": " << r.err;
    const Expected e = library_examples(info->name, {}, "train", 1, 0, 3);
    const auto lines = lines_of(read_file(path));
    ASSERT_EQ(lines.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      const IntArrays a = parse_int_arrays(lines[i]);
      EXPECT_TRUE(same(a.at("input_ids"), e.examples[i].input_ids)) << info->name << " " << i;
      EXPECT_TRUE(same(a.at("labels"), e.examples[i].labels)) << info->name << " " << i;
      EXPECT_TRUE(same(a.at("score_mask"), e.examples[i].score_mask)) << info->name << " " << i;
    }
  }
}

TEST(CliGenerate, NpyHeaderAndPayload) {
  const auto dir = fresh_dir("npy");
  const auto path = (dir / "ff.npy").string();
  const CliResult r = run_cli({"generate", "flipflop", "-p", "length=12", "--split", "sparse", "-n", "9", "-o", path});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::vector<int32_t> v = read_npy(read_file(path), "(9, 3, 12)");
  ASSERT_EQ(v.size(), 9u * 3 * 12);
  const Expected e = library_examples("flipflop", {{"length", "12"}}, "sparse", 0, 0, 9);
  for (size_t i = 0; i < 9; ++i) {
    const auto row = v.begin() + static_cast<std::ptrdiff_t>(i * 36);
    EXPECT_TRUE(same(std::vector<int32_t>(row, row + 12), e.examples[i].input_ids)) << i;
    EXPECT_TRUE(same(std::vector<int32_t>(row + 12, row + 24), e.examples[i].labels)) << i;
    EXPECT_TRUE(same(std::vector<int32_t>(row + 24, row + 36), e.examples[i].score_mask)) << i;
  }
}

// The code points of a UTF-32LE payload, as text when they are ASCII.
std::string utf32_ascii(const std::string& b) {
  std::string out;
  for (size_t i = 0; i + 4 <= b.size(); i += 4) out.push_back(static_cast<char>(le32(b, i)));
  return out;
}

TEST(CliGenerate, NpzIsAValidStoredZipOfThreeArraysAndItsMetadata) {
  const auto dir = fresh_dir("npz");
  const auto path = (dir / "ff.npz").string();
  const CliResult r = run_cli({"generate", "flipflop", "-p", "length=10", "--seed", "3", "-n", "7", "-o", path});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string b = read_file(path);
  const Expected e = library_examples("flipflop", {{"length", "10"}}, "train", 3, 0, 7);
  // End of central directory (no comment): the last 22 bytes.
  ASSERT_GE(b.size(), 22u);
  const size_t eocd = b.size() - 22;
  ASSERT_EQ(le32(b, eocd), 0x06054b50u);
  ASSERT_EQ(le16(b, eocd + 10), 5u);
  const size_t cd_size = le32(b, eocd + 12), cd_offset = le32(b, eocd + 16);
  EXPECT_EQ(cd_offset + cd_size, eocd);
  const char* names[] = {"input_ids.npy", "labels.npy", "score_mask.npy", "vocab.npy", "meta.npy"};
  size_t at = cd_offset, expected_local = 0;
  for (int m = 0; m < 5; ++m) {
    ASSERT_EQ(le32(b, at), 0x02014b50u) << m;
    EXPECT_EQ(le16(b, at + 10), 0u);  // stored
    const uint32_t crc = le32(b, at + 16), csize = le32(b, at + 20), usize = le32(b, at + 24);
    const size_t name_len = le16(b, at + 28), extra = le16(b, at + 30), comment = le16(b, at + 32);
    const size_t local = le32(b, at + 42);
    EXPECT_EQ(b.substr(at + 46, name_len), names[m]);
    EXPECT_EQ(csize, usize);
    EXPECT_EQ(local, expected_local);
    // The local header repeats the same facts.
    ASSERT_EQ(le32(b, local), 0x04034b50u);
    EXPECT_EQ(le16(b, local + 6), 0u);  // no data descriptor
    EXPECT_EQ(le16(b, local + 8), 0u);
    EXPECT_EQ(le32(b, local + 14), crc);
    EXPECT_EQ(le32(b, local + 18), csize);
    EXPECT_EQ(le32(b, local + 22), usize);
    const size_t lname = le16(b, local + 26), lextra = le16(b, local + 28);
    EXPECT_EQ(b.substr(local + 30, lname), names[m]);
    const size_t data = local + 30 + lname + lextra;
    ASSERT_LE(data + csize, b.size());
    EXPECT_EQ(reference_crc32(b.data() + data, csize), crc) << names[m];
    expected_local = data + csize;
    at += 46 + name_len + extra + comment;
    if (m >= 3) {  // the token names ('<U1' [5]) and the sidecar's JSON ('<U{n}', 0-d)
      const std::string npy = b.substr(data, csize);
      const size_t header = 10 + le16(npy, 8);
      const std::string dict = npy.substr(10, header - 10);
      if (m == 3) {
        EXPECT_NE(dict.find("'descr': '<U1', 'fortran_order': False, 'shape': (5,)"), std::string::npos) << dict;
        EXPECT_EQ(utf32_ascii(npy.substr(header)), "wri01");
      } else {
        EXPECT_NE(dict.find("'shape': ()"), std::string::npos) << dict;
        EXPECT_EQ(utf32_ascii(npy.substr(header)), read_file(path + ".meta.json"));
      }
      continue;
    }
    const std::vector<int32_t> v = read_npy(b.substr(data, csize), "(7, 10)");
    ASSERT_EQ(v.size(), 70u);
    for (size_t i = 0; i < 7; ++i) {
      const auto row = v.begin() + static_cast<std::ptrdiff_t>(i * 10);
      const std::vector<int32_t> got(row, row + 10);
      if (m == 0) EXPECT_TRUE(same(got, e.examples[i].input_ids)) << i;
      if (m == 1) EXPECT_TRUE(same(got, e.examples[i].labels)) << i;
      if (m == 2) EXPECT_TRUE(same(got, e.examples[i].score_mask)) << i;
    }
  }
  EXPECT_EQ(expected_local, cd_offset);
}

TEST(CliGenerate, ThreadCountDoesNotChangeTheBytes) {
  const auto dir = fresh_dir("threads");
  for (const char* ext : {"jsonl", "npy", "npz"}) {
    std::string files[2];
    for (int k = 0; k < 2; ++k) {
      const auto path = (dir / (std::string("t") + std::to_string(k) + "." + ext)).string();
      // length 64: 1024 examples per chunk, so 5000 examples are several chunks.
      const CliResult r = run_cli({"generate", "flipflop", "-p", "length=64", "-n", "5000", "--seed", "11", "-o", path,
                                   "--threads", k == 0 ? "1" : "3"});
      ASSERT_EQ(r.rc, 0) << r.err;
      files[k] = read_file(path);
    }
    EXPECT_GT(files[0].size(), 5000u * 64);
    EXPECT_TRUE(files[0] == files[1]) << ext;
  }
}

TEST(CliGenerate, StartOffsetsSelectLaterExamples) {
  const auto dir = fresh_dir("start");
  const auto all = (dir / "all.jsonl").string(), tail = (dir / "tail.jsonl").string();
  ASSERT_EQ(run_cli({"generate", "flipflop", "-p", "length=32", "-n", "10", "-o", all}).rc, 0);
  ASSERT_EQ(run_cli({"generate", "flipflop", "-p", "length=32", "-n", "4", "--start", "6", "-o", tail}).rc, 0);
  const auto a = lines_of(read_file(all)), t = lines_of(read_file(tail));
  ASSERT_EQ(a.size(), 10u);
  ASSERT_EQ(t.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(t[i], a[6 + i]);
  EXPECT_NE(a[0], a[6]);
}

TEST(CliGenerate, FormatOptionOverridesTheExtension) {
  const auto dir = fresh_dir("format");
  const auto path = (dir / "data.bin").string();
  const CliResult r = run_cli({"generate", "flipflop", "-p", "length=8", "-n", "2", "-o", path, "--format", "npy"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(read_npy(read_file(path), "(2, 3, 8)").size(), 48u);
}

TEST(CliGenerate, HelpDocumentsTheFormats) {
  const CliResult r = run_cli({"generate", "--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("[N, 3, T]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("npz"), std::string::npos);
}

TEST(CliErrors, OneLineExitTwoAndNothingWritten) {
  struct Case {
    std::vector<std::string> args;  // "{dir}" is replaced by the case's directory
    std::string needle;             // must appear in the error line
  };
  const std::vector<std::string> ok{"-n", "2", "-o", "{dir}/a.jsonl"};
  auto gen = [&](std::vector<std::string> extra, std::vector<std::string> tail = {}) {
    std::vector<std::string> a{"generate"};
    a.insert(a.end(), extra.begin(), extra.end());
    a.insert(a.end(), tail.begin(), tail.end());
    return a;
  };
  std::vector<Case> cases = {
      {gen({"nosuch"}, ok), "'nosuch'"},
      {gen({"flipflop", "-p", "length"}, ok), "'length'"},
      {gen({"flipflop", "-p", "colour=red"}, ok), "'colour'"},
      {gen({"flipflop", "-p", "length=7"}, ok), "'7'"},
      {gen({"flipflop", "-p", "length=abc"}, ok), "'abc'"},
      {gen({"flipflop", "-p", "p_ignore=1.5"}, ok), "'1.5'"},
      {gen({"flipflop", "--split", "nope"}, ok), "'nope'"},
      {gen({"flipflop", "-n", "0", "-o", "{dir}/a.jsonl"}), "'0'"},
      {gen({"flipflop", "-n", "-3", "-o", "{dir}/a.jsonl"}), "'-3'"},
      {gen({"flipflop", "-n", "abc", "-o", "{dir}/a.jsonl"}), "'abc'"},
      {gen({"flipflop", "-n", "1.5", "-o", "{dir}/a.jsonl"}), "'1.5'"},
      {gen({"flipflop", "-n", "2", "-o", "{dir}/missing/a.jsonl"}), "missing/a.jsonl"},
      {gen({"flipflop", "-n", "2", "-o", "{dir}/sub.jsonl"}), "sub.jsonl"},
      {gen({"flipflop", "-n", "2", "-o", "{dir}/sub", "--format", "jsonl"}), "sub"},
      {gen({"flipflop", "-n", "2", "-o", "/proc/statebench_test.npy"}), "/proc/statebench_test.npy"},
      {gen({"flipflop", "-n", "2", "-o", "{dir}/a.txt"}), "a.txt"},
      {gen({"flipflop", "--format", "csv"}, ok), "'csv'"},
      {gen({"flipflop", "--seed", "-1"}, ok), "'-1'"},
      {gen({"flipflop", "--start", "x7"}, ok), "'x7'"},
      {gen({"flipflop", "--start", "18446744073709551615"}, ok), "18446744073709551615"},
      {gen({"flipflop", "--threads", "-1"}, ok), "-1"},
      {gen({"flipflop", "-n", "2"}), "--output"},
      {gen({"flipflop", "-o", "{dir}/a.jsonl"}), "--count"},
      {{"tasks", "show", "nosuch"}, "'nosuch'"},
      {{"tasks", "show", "flipflop", "-p", "bad"}, "'bad'"},
      {{"bench", "tasks", "--seconds", "0"}, "--seconds 0"},
      {{"bench", "tasks", "--seconds", "0.01", "--json", "{dir}/missing/b.json"}, "missing/b.json"},
      {{"bench"}, "subcommand"},
      {{"bench", "train", "--presets", "flipflop_ref,nosuch"}, "'nosuch'"},
  };
  if (::geteuid() != 0) cases.push_back({gen({"flipflop"}, {"-n", "2", "-o", "{dir}/ro/a.jsonl"}), "ro/a.jsonl"});
  int k = 0;
  for (Case c : cases) {
    const auto dir = fresh_dir("err" + std::to_string(k++));
    fs::create_directory(dir / "sub.jsonl");
    fs::create_directory(dir / "sub");
    fs::create_directory(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    write_file_atomic((dir / "a.jsonl").string(), "old contents\n");  // must survive every failure
    const auto before = dir_contents(dir);
    for (auto& a : c.args) {
      const auto at = a.find("{dir}");
      if (at != std::string::npos) a.replace(at, 5, dir.string());
    }
    const CliResult r = run_cli(c.args);
    EXPECT_EQ(r.rc, 2) << show(c.args) << "\n" << r.err;
    EXPECT_EQ(r.out, "") << show(c.args);
    EXPECT_EQ(r.err.rfind("statebench: error: ", 0), 0u) << show(c.args) << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << show(c.args) << "\n" << r.err;
    EXPECT_EQ(r.err.back(), '\n');
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << show(c.args) << "\n" << r.err;
    EXPECT_EQ(dir_contents(dir), before) << show(c.args);
    EXPECT_TRUE(fs::is_empty(dir / "ro"));
    fs::permissions(dir / "ro", fs::perms::owner_all);
  }
}

TEST(CliErrors, InterruptRemovesTheTemporaryFile) {
  const auto dir = fresh_dir("interrupt");
  const auto path = (dir / "big.jsonl").string();
  // Far more examples than can be written before the signal arrives.
  const pid_t pid = spawn_cli({"generate", "flipflop", "-n", "1000000000", "-o", path, "--threads", "1"},
                              capture_dir() / "int_out", capture_dir() / "int_err");
  // Wait until the temporary file exists (generation has started), then press Ctrl-C.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (fs::is_empty(dir) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_FALSE(fs::is_empty(dir));
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit_code(pid), 2);
  const std::string err = read_file((capture_dir() / "int_err").string());
  EXPECT_NE(err.find("statebench: error: interrupted"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(CliGenerate, ProgressBarOnlyOnATerminal) {
  const auto dir = fresh_dir("progress");
  // 8192 x 512 tokens: large enough for a progress display.
  const std::vector<std::string> args{"generate", "flipflop", "-n", "8192", "-o", (dir / "p.npy").string()};
  const CliResult plain = run_cli(args);
  ASSERT_EQ(plain.rc, 0) << plain.err;
  EXPECT_EQ(plain.err, "");  // not a terminal: silent

  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  const pid_t pid = spawn_cli(args, capture_dir() / "pty_out", capture_dir() / "unused", slave);
  ::close(slave);
  std::string tty;
  for (;;) {  // drain the terminal until the child closes it
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 20000) <= 0) break;
    char buf[4096];
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;
    tty.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(wait_exit_code(pid), 0);
  ::close(master);
  EXPECT_NE(tty.find('\r'), std::string::npos) << tty;
  EXPECT_NE(tty.find("100%"), std::string::npos) << tty;
  EXPECT_NE(tty.find("generate flipflop"), std::string::npos) << tty;
  fs::remove_all(dir);
}

TEST(CliBench, TasksPrintsALinePerTaskAndJson) {
  const auto dir = fresh_dir("bench");
  const auto json = (dir / "bench.json").string();
  const CliResult r = run_cli({"bench", "tasks", "--seconds", "0.05", "--json", json});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto lines = lines_of(r.out);
  const std::string doc = read_file(json);
  for (const TaskInfo* info : registry().list()) {
    int rows = 0, measured = 0;
    for (const auto& l : lines) {
      if (l.rfind(info->name + " ", 0) != 0) continue;
      ++rows;
      if (l.find("skipped: ") != std::string::npos) continue;  // needs a parameter it was not given
      ++measured;
      const double mtok = std::stod(l.substr(l.find_last_of(' ') + 1));
      EXPECT_GT(mtok, 0.0) << l;
    }
    EXPECT_GE(rows, 1) << info->name << "\n" << r.out;
    if (creatable_at_defaults(*info)) EXPECT_GE(measured, 1) << info->name << "\n" << r.out;
    if (measured > 0) EXPECT_NE(doc.find("\"task\": \"" + info->name + "\""), std::string::npos) << doc;
  }
  EXPECT_NE(doc.find("\"tokens_per_s\""), std::string::npos);
  EXPECT_NE(r.out.find("M tok/s"), std::string::npos);
}
