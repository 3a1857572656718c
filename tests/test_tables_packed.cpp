// test_tables_packed.cpp: a study whose cells' summaries are packed in one cells.jsonl.gz (the form
// results/ keeps; an uncompressed cells.jsonl is read alike): the same tables as from
// cells/<id>/summary.json, packed and unpacked cells mixed, unfinished cells beside the file,
// corrupt and duplicate lines, lines of no manifest cell, and through the binary: the error for a
// corrupt line names the file and line, exit 2.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "report/results.hpp"
#include "report/tables.hpp"
#include "tables_fixture.hpp"
#include "test_util.hpp"

namespace sb::report {
namespace {

namespace fs = std::filesystem;
using namespace tables_test;
using sb::test::run_cli;

std::vector<RunSpec> runs() {
  std::vector<RunSpec> out;
  for (const char* att : {"path", "rope"})
    for (int depth : {1, 2})
      for (int seed : {0, 1}) {
        RunSpec r;
        r.attention = att, r.depth = depth, r.seed = seed;
        const double acc = 0.5 + 0.1 * depth + 0.05 * seed + (att[0] == 'p' ? 0.2 : 0);
        r.evals = {{"val", {acc}}, {"sparse", {acc / 2}}};
        out.push_back(r);
      }
  return out;
}

// Writes `text` gzip-compressed to `path`.
void write_gzip(const fs::path& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb9");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// Packs DIR/cells/<id>/summary.json of `ids` into DIR/cells.jsonl.gz (as scripts/reproduce.sh does;
// `plain`: an uncompressed DIR/cells.jsonl) and removes their folders; `extra` lines are appended
// as they are.
void pack(const fs::path& dir, const std::vector<std::string>& ids, const std::vector<std::string>& extra = {},
          bool plain = false) {
  std::string text;
  for (const auto& id : ids) {
    std::string summary = read_file((dir / "cells" / id / "summary.json").string());
    while (!summary.empty() && summary.back() == '\n') summary.pop_back();
    text += fmt::format("{{\"id\": \"{}\", \"summary\": {}}}\n", id, summary);
    fs::remove_all(dir / "cells" / id);
  }
  for (const auto& line : extra) text += line + "\n";
  if (plain)
    write_file_atomic((dir / "cells.jsonl").string(), text);
  else
    write_gzip(dir / "cells.jsonl.gz", text);
}

std::vector<std::string> ids_of(const std::vector<RunSpec>& rs) {
  std::vector<std::string> out;
  for (const auto& r : rs) out.push_back(cell_id(r));
  return out;
}

std::string all_tables(const Study& s) {
  TableOptions o;
  o.tables = {"grid", "min-depth", "errors", "runs"};
  const auto tables = build_tables(s, o);
  return render_markdown(s, tables) + render_csv(tables);
}

TEST(PackedCells, GiveTheSameTablesAsCellFolders) {
  const std::string unpacked = all_tables(load_study(write_sweep("packed_ref", runs()).string()));
  const fs::path dir = write_sweep("packed_ref", runs());
  pack(dir, ids_of(runs()));
  fs::remove(dir / "cells");  // empty now
  const Study s = load_study(dir.string());
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(all_tables(s), unpacked);
  ASSERT_EQ(s.runs.size(), 8u);
  EXPECT_EQ(s.runs[0].source, fmt::format("'{}' line 1 (cell {})", (dir / "cells.jsonl.gz").string(), s.runs[0].id));
  EXPECT_EQ(s.runs[0].dir, (dir / "cells" / s.runs[0].id).string());  // where its folder would be
}

TEST(PackedCells, AnUncompressedFileIsReadAlike) {
  const std::string unpacked = all_tables(load_study(write_sweep("packed_plain", runs()).string()));
  const fs::path dir = write_sweep("packed_plain", runs());
  pack(dir, ids_of(runs()), {}, true);
  fs::remove(dir / "cells");
  const Study s = load_study(dir.string());
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(all_tables(s), unpacked);
  EXPECT_EQ(s.runs[0].source, fmt::format("'{}' line 1 (cell {})", (dir / "cells.jsonl").string(), s.runs[0].id));
}

TEST(PackedCells, MixWithCellFoldersAndUnfinishedCells) {
  const std::vector<RunSpec> rs = runs();
  const fs::path dir = write_sweep("packed_mixed", rs, {cell_id(rs[7])});
  pack(dir, {cell_id(rs[0]), cell_id(rs[1]), cell_id(rs[2])});
  // rs[3]: unfinished (a folder with its config only); rs[4..6]: folders; rs[7]: missing.
  fs::remove(dir / "cells" / cell_id(rs[3]) / "summary.json");
  write_file_atomic((dir / "cells" / cell_id(rs[3]) / "config.yaml").string(),
                    "task: {name: word_problem, params: {length: 16}}\nmodel: {attention: path, n_layers: 2}\ntrain: {seed: 1}\n");
  const Study s = load_study(dir.string());
  ASSERT_EQ(s.runs.size(), 8u);
  for (size_t i : {0, 1, 2, 4, 5, 6}) EXPECT_EQ(s.runs[i].status, RunStatus::completed) << i;
  EXPECT_EQ(s.runs[3].status, RunStatus::unfinished);
  EXPECT_EQ(s.runs[7].status, RunStatus::missing);
  EXPECT_CONTAINS(s.runs[0].source, "cells.jsonl.gz' line 1");
  EXPECT_EQ(s.runs[4].source, "'" + (dir / "cells" / cell_id(rs[4]) / "summary.json").string() + "'");
}

TEST(PackedCells, WithoutAManifestTheLinesAreTheRuns) {
  const fs::path dir = write_sweep("packed_scan", runs());
  fs::remove(dir / "manifest.json");
  const std::vector<std::string> ids = ids_of(runs());
  pack(dir, {ids[3], ids[0], ids[1]});  // any order: runs come in natural name order
  const Study s = load_study(dir.string());
  ASSERT_EQ(s.runs.size(), 8u);
  EXPECT_EQ(s.runs[0].id, ids[0]);
  EXPECT_EQ(s.runs[3].id, ids[3]);
}

TEST(PackedCells, CorruptLinesAreSkippedWithAWarningOrRefusedWhenStrict) {
  const std::vector<RunSpec> rs = runs();
  const fs::path dir = write_sweep("packed_corrupt", rs);
  std::vector<std::string> ids = ids_of(rs);
  pack(dir, ids,
       {"{\"id\": \"x\", \"summary\": [1]}", "not json", "",
        "{\"id\": \"stray\", \"summary\": {\"status\": \"completed\"}}"});
  // A summary with a field of the wrong type: that cell is unreadable.
  std::string text = read_file_gzip((dir / "cells.jsonl.gz").string());
  const size_t at = text.find("\"n_layers\": 1");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 13, "\"n_layers\": \"one\"");
  write_gzip(dir / "cells.jsonl.gz", text);
  const Study s = load_study(dir.string());
  const std::string file = (dir / "cells.jsonl.gz").string();
  ASSERT_EQ(s.warnings.size(), 4u);
  EXPECT_EQ(s.warnings[0], fmt::format("skipping '{}' line 9: no object \"summary\"", file));
  EXPECT_CONTAINS(s.warnings[1], fmt::format("skipping '{}' line 10: not valid JSON (", file));
  EXPECT_CONTAINS(s.warnings[2], fmt::format("skipping '{}' line 1 (cell {}): 'model.n_layers'", file, ids[0]));
  EXPECT_EQ(s.warnings[3], fmt::format("'{}': 1 line of no cell in '{}' left out (first: cell stray)", file,
                                       (dir / "manifest.json").string()));
  EXPECT_EQ(s.runs[0].status, RunStatus::unreadable);
  EXPECT_EQ(s.runs[1].status, RunStatus::completed);

  LoadOptions strict;
  strict.strict = true;
  try {
    load_study(dir.string(), strict);
    ADD_FAILURE() << "strict load of a corrupt cells.jsonl.gz succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), fmt::format("'{}' line 9: no object \"summary\"", file));
  }
  // Through the binary: one line naming the file and line, exit 2; without --strict, a warning.
  const auto r = run_cli({"table", dir.string(), "--strict", "--no-plots"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_CONTAINS(r.err, fmt::format("'{}' line 9: no object \"summary\"", file));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  const auto lenient = run_cli({"table", dir.string(), "--no-plots"});
  EXPECT_EQ(lenient.rc, 0) << lenient.err;
  EXPECT_CONTAINS(lenient.err, "line 10: not valid JSON");
  EXPECT_CONTAINS(lenient.out, "| path  | 1     |");
}

TEST(PackedCells, ACellGivenTwiceIsAnError) {
  const std::vector<RunSpec> rs = runs();
  const fs::path dir = write_sweep("packed_twice", rs);
  const std::string id = cell_id(rs[2]);
  const std::string line = fmt::format("{{\"id\": \"{}\", \"summary\": {}}}", id, summary_json(rs[2]).substr(0, summary_json(rs[2]).size() - 1));
  pack(dir, ids_of(rs), {line});
  const auto r = run_cli({"table", dir.string(), "--no-plots"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_CONTAINS(r.err, fmt::format("'{}' line 9: cell '{}' is given twice (first on line 3)", (dir / "cells.jsonl.gz").string(), id));
}

}  // namespace
}  // namespace sb::report
