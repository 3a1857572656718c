// test_results_tables.cpp: the committed results/ as a reader gets them (results/README.md). Every
// committed tables.md, tables.csv and plots/*.svg is what the real `statebench table` makes from the
// files that stay: a study folder from itself, a pooled folder from its study folders in name
// order. Each folder keeps the reader's layout (the cells' summaries packed in one cells.jsonl.gz, no
// per-cell folders, metrics.jsonl, config.yaml or PNGs; one curves.jsonl.gz per study). And
// scripts/reproduce.sh --collect --pool writes that layout.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "io/json.hpp"
#include "test_util.hpp"

namespace sb::test {
namespace {

const fs::path kResults = fs::path(SB_SOURCE_DIR) / "results";

bool is_study(const fs::path& dir) { return fs::exists(dir / "manifest.json"); }

std::vector<std::string> folders() {
  std::vector<std::string> out;
  if (!fs::is_directory(kResults)) return out;
  for (const auto& e : fs::directory_iterator(kResults))
    if (e.is_directory()) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The study folders of a pooled folder, in name order (byte order, as `LC_ALL=C` globs).
std::vector<fs::path> studies_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && is_study(e.path())) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> svg_names(const fs::path& dir) {
  std::vector<std::string> out;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".svg") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// `statebench table DIRS` (Markdown with the plots into a scratch directory, then CSV) against the
// files committed in `at`; plots only where `plots` (a pooled folder's studies have none).
void expect_rebuilds(const std::vector<fs::path>& dirs, const fs::path& at, bool plots) {
  SCOPED_TRACE(at.string());
  std::vector<std::string> args{"table"};
  for (const auto& d : dirs) args.push_back(d.string());
  const fs::path scratch = fresh_dir("results_plots_" + std::to_string(::getpid()));  // ctest runs tests in parallel
  struct Remove {
    fs::path dir;
    ~Remove() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } remove{scratch};
  std::vector<std::string> md = args;
  if (plots) md.insert(md.end(), {"--plots", scratch.string()});
  else md.push_back("--no-plots");
  const CliResult m = run_cli(md);
  ASSERT_EQ(m.rc, 0) << m.err;
  EXPECT_EQ(m.out, read_file((at / "tables.md").string()));
  args.insert(args.end(), {"--format", "csv", "--no-plots"});
  const CliResult c = run_cli(args);
  ASSERT_EQ(c.rc, 0) << c.err;
  EXPECT_EQ(c.out, read_file((at / "tables.csv").string()));
  if (!plots) {
    EXPECT_FALSE(fs::exists(at / "plots"));
    return;
  }
  const std::vector<std::string> committed = svg_names(at / "plots");
  EXPECT_FALSE(committed.empty());
  EXPECT_EQ(committed, svg_names(scratch));
  for (const auto& name : committed)
    if (fs::exists(scratch / name))
      EXPECT_EQ(read_file((scratch / name).string()), read_file((at / "plots" / name).string())) << name;
}

// The lines of a study's cells.jsonl.gz: id -> the summary object (checked: one JSON object per line
// with a string "id", given once, and an object "summary").
std::map<std::string, Json> packed_cells(const fs::path& dir) {
  std::map<std::string, Json> out;
  for (const std::string& line : lines_of(read_file_gzip((dir / "cells.jsonl.gz").string()))) {
    const Json j = Json::parse(line);
    EXPECT_TRUE(j.is_object() && j.size() == 2 && j.begin().key() == "id" && j["id"].is_string()) << line.substr(0, 80);
    EXPECT_TRUE(j.contains("summary") && j["summary"].is_object()) << line.substr(0, 80);
    EXPECT_TRUE(out.emplace(j["id"].get<std::string>(), j["summary"]).second) << "given twice: " << j["id"];
  }
  return out;
}

// What one study folder must hold, and must not: every cell the manifest says finished is a line
// of cells.jsonl.gz, with that status; there is no cells/ folder.
void expect_study_layout(const fs::path& dir) {
  SCOPED_TRACE(dir.string());
  for (const char* f : {"study.yaml", "manifest.json", "PROVENANCE.md", "tables.md", "tables.csv", "curves.jsonl.gz", "cells.jsonl.gz"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  const std::map<std::string, Json> cells = packed_cells(dir);
  if (fs::exists(dir / "cells"))  // only unfinished cells, each with its config.yaml alone
    for (const auto& e : fs::directory_iterator(dir / "cells")) {
      EXPECT_EQ(cells.count(e.path().filename().string()), 0u) << "a finished cell's folder " << e.path();
      EXPECT_EQ(std::distance(fs::directory_iterator(e.path()), fs::directory_iterator{}), 1) << e.path();
      EXPECT_TRUE(fs::exists(e.path() / "config.yaml")) << e.path();
    }
  EXPECT_GT(cells.size(), 0u);
  size_t finished = 0;
  const Json manifest = Json::parse(read_file((dir / "manifest.json").string()));
  for (const Json& c : manifest["cells"]) {
    if (c.value("state", "") != "finished") continue;
    ++finished;
    const auto it = cells.find(c["id"].get<std::string>());
    if (it == cells.end()) ADD_FAILURE() << "no line for finished cell " << c["id"];
    else EXPECT_EQ(it->second.value("status", ""), c.value("status", "")) << c["id"];
  }
  EXPECT_EQ(finished, cells.size());
}

class ResultsFolder : public ::testing::TestWithParam<std::string> {};

TEST_P(ResultsFolder, TablesAndPlotsRebuildFromWhatIsCommitted) {
  const fs::path dir = kResults / GetParam();
  if (is_study(dir)) {
    expect_rebuilds({dir}, dir, true);
    return;
  }
  const std::vector<fs::path> studies = studies_in(dir);
  ASSERT_GE(studies.size(), 2u) << dir << ": neither a study (manifest.json) nor a pooled folder of studies";
  for (const auto& s : studies) expect_rebuilds({s}, s, false);
  expect_rebuilds(studies, dir, true);
}

// A study exported with cells still running keeps each unfinished cell's config.yaml (the table
// reads it to name the cell: docs/tables.md) at cells/<id>/, and only there.
bool unfinished_cell_config(const fs::path& study, const fs::path& file) {
  if (file.filename() != "config.yaml" || file.parent_path().parent_path() != study / "cells") return false;
  return packed_cells(study).count(file.parent_path().filename().string()) == 0;
}

TEST_P(ResultsFolder, KeepsTheReadersLayout) {
  const fs::path dir = kResults / GetParam();
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (unfinished_cell_config(dir, e.path())) continue;
    EXPECT_FALSE(name == "metrics.jsonl" || name == "config.yaml" || name == "summary.json" || name == "invocations.tsv" ||
                 e.path().extension() == ".png" || e.path().extension() == ".tmp")
        << e.path();
  }
  if (is_study(dir)) {
    expect_study_layout(dir);
    return;
  }
  EXPECT_TRUE(fs::exists(dir / "PROVENANCE.md"));
  const std::string provenance = read_file((dir / "PROVENANCE.md").string());
  for (const auto& s : studies_in(dir)) {
    expect_study_layout(s);
    EXPECT_CONTAINS(provenance, "| `" + s.filename().string() + "` |");
  }
}

INSTANTIATE_TEST_SUITE_P(Committed, ResultsFolder, ::testing::ValuesIn(folders()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(Results, ReadmeNamesEveryFolder) {
  const std::vector<std::string> names = folders();
  ASSERT_FALSE(names.empty());
  const std::string readme = read_file((kResults / "README.md").string());
  for (const auto& n : names) EXPECT_CONTAINS(readme, "`" + n + "/`");
}

// reproduce.sh --collect --pool: two small real sweeps (parity, 4 steps, seeds 0-1 and 2-3) become
// results/pair/<study>/ each, and results/pair/ gets the pooled tables (4 seeds a cell), the plots
// and a PROVENANCE.md listing both; the curves file unpacks to each cell's metrics lines.
// Collecting one of them again without --pool puts it back into its group.
TEST(Results, ReproduceCollectPoolsStudiesIntoOneFolder) {
  const fs::path root = fresh_dir("collect_pool"), sweeps = root / "sweeps", results = root / "results";
  const std::string config =
      "config:\n  task: {name: parity, params: {length: 8}}\n  model: {d_model: 16, n_heads: 2}\n"
      "  train: {steps: 4, batch_size: 8, log_every: 1, eval_every: 2, eval_examples: 32}\n";
  for (const auto& [name, seeds] : {std::pair<std::string, std::string>{"pair_a", "[0, 1]"}, {"pair_b", "[2, 3]"}}) {
    const fs::path study = root / (name + ".yaml");
    write_file_atomic(study.string(), "name: " + name + "\n" + config + "grid: {model.attention: [path, rope], train.seed: " +
                                          seeds + "}\n");
    const CliResult r = run_cli({"sweep", study.string(), "--out", (sweeps / name).string(), "--workers", "2", "--progress",
                                 "plain"});
    ASSERT_EQ(r.rc, 0) << r.err;
    write_file_atomic((sweeps / name / "invocations.tsv").string(),
                      "2026-11-22T05:40:04Z\tabc123\tCPU test\t60.4\t0\tstatebench sweep " + name + "\n");
  }
  const std::string script = std::string(SB_SOURCE_DIR) + "/scripts/reproduce.sh";
  const std::string run = "SWEEPS='" + sweeps.string() + "' RESULTS='" + results.string() + "' bash '" + script +
                          "' --build '" + fs::path(SB_CLI_PATH).parent_path().string() + "' --collect ";
  const fs::path log = root / "collect.log";
  ASSERT_EQ(std::system((run + "--pool pair pair_a pair_b > '" + log.string() + "' 2>&1").c_str()), 0) << read_file(log.string());
  const fs::path group = results / "pair";
  const std::vector<fs::path> studies{group / "pair_a", group / "pair_b"};
  for (const auto& s : studies) expect_study_layout(s);
  EXPECT_FALSE(fs::exists(results / "pair_a"));
  for (const auto& e : fs::recursive_directory_iterator(group))
    EXPECT_FALSE(e.path().filename() == "metrics.jsonl" || e.path().filename() == "config.yaml" ||
                 e.path().filename() == "summary.json")
        << e.path();
  // Each cell's line holds its summary.json unchanged (the same text, newline aside).
  const std::string packed = read_file_gzip((group / "pair_a" / "cells.jsonl.gz").string());
  EXPECT_EQ(lines_of(packed).size(), 4u);
  for (const auto& c : fs::directory_iterator(sweeps / "pair_a" / "cells")) {
    std::string summary = read_file((c.path() / "summary.json").string());
    while (!summary.empty() && summary.back() == '\n') summary.pop_back();
    EXPECT_CONTAINS(packed, "{\"id\": \"" + c.path().filename().string() + "\", \"summary\": " + summary + "}\n");
  }
  EXPECT_CONTAINS(read_file((group / "tables.md").string()), "# pair_a + pair_b");
  EXPECT_CONTAINS(read_file((group / "tables.md").string()), "(4) |");  // four seeds pooled in a cell
  expect_rebuilds(studies, group, true);
  const std::string provenance = read_file((group / "PROVENANCE.md").string());
  EXPECT_CONTAINS(provenance, "`statebench table results/pair/pair_a results/pair/pair_b`");
  EXPECT_CONTAINS(provenance, "| `pair_b` | 4 (0 skipped by the protocol) | abc123 | CPU test |");
  EXPECT_CONTAINS(read_file((group / "pair_a" / "PROVENANCE.md").string()), "`statebench table results/pair/pair_a`");

  // The curves: every cell's metrics lines, in order, with the cell id first.
  const fs::path unpacked = root / "unpacked";
  const std::string curves = std::string(SB_SOURCE_DIR) + "/tools/curves.sh";
  ASSERT_EQ(std::system(("bash '" + curves + "' unpack '" + (group / "pair_a" / "curves.jsonl.gz").string() + "' '" +
                         unpacked.string() + "'").c_str()),
            0);
  size_t cells = 0;
  for (const auto& c : fs::directory_iterator(sweeps / "pair_a" / "cells")) {
    const auto original = lines_of(read_file((c.path() / "metrics.jsonl").string()));
    const auto rounded = lines_of(read_file((unpacked / "cells" / c.path().filename() / "metrics.jsonl").string()));
    ASSERT_EQ(rounded.size(), original.size()) << c.path();
    ASSERT_FALSE(original.empty());
    for (size_t i = 0; i < original.size(); ++i) {  // the same record: kind and step agree
      const std::string head = original[i].substr(0, original[i].find(',', original[i].find("\"step\"")));
      EXPECT_EQ(rounded[i].substr(0, head.size()), head);
    }
    ++cells;
  }
  EXPECT_EQ(cells, 4u);

  // Collected again without --pool, pair_b goes back into its group, whose pooled tables are rebuilt.
  write_file_atomic((group / "tables.md").string(), "stale\n");
  ASSERT_EQ(std::system((run + "pair_b > '" + log.string() + "' 2>&1").c_str()), 0) << read_file(log.string());
  EXPECT_TRUE(fs::exists(group / "pair_b" / "manifest.json"));
  EXPECT_FALSE(fs::exists(results / "pair_b"));
  expect_rebuilds(studies, group, true);
}

}  // namespace
}  // namespace sb::test
