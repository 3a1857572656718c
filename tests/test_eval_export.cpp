// test_eval_export.cpp: `statebench eval` and `statebench export` on finished runs, through the
// real binary. eval repeats the run's own evaluation exactly, scores new lengths, merges into
// eval.json without touching the run's files, and refuses unfinished runs and unreadable records;
// export writes a safetensors file whose parsed header and tensors equal the checkpoint's, and
// tools/check_export.py lists it (any python3) and matches the PyTorch reference's logits to 1e-5
// (where torch imports; skipped with a message otherwise).
#include <cstdio>
#include <cstring>

#include "cli_run.hpp"
#include "io/json.hpp"
#include "model/transformer.hpp"
#include "test_util.hpp"
#include "train/finished_run.hpp"

namespace sb::test {
namespace {

// Running parity of 8 bits after <bos> (T = 9); the second model mixes every other kind of layer.
const char* kParity = R"(task: {name: parity, params: {length: 8, bos: true}, eval: [val]}
model: {d_model: 16, n_layers: 2, n_heads: 2, layers: [path_fox, rope], path: {rank: 4, block: 4}}
optim: {lr: 0.01, warmup_steps: 2}
train: {steps: 20, batch_size: 8, seed: 5, log_every: 5, eval_every: 10, eval_examples: 24, threads: 1}
)";
const char* kHybrid = R"(task: {name: parity, params: {length: 6}, eval: [val, test]}
model: {d_model: 12, n_layers: 3, n_heads: 3, layers: [fox, nope, path], mlp: gelu, norm: layernorm,
        tied_embeddings: true, path: {rank: 3, block: 2, conv_bias: true, beta_clamp: 1.5}}
optim: {lr: 0.02, warmup_steps: 0}
train: {steps: 12, batch_size: 4, seed: 2, log_every: 4, eval_every: 6, eval_examples: 16, threads: 1}
)";

// Trains `yaml` into DIR/run (once per test binary run: fresh_dir empties DIR).
fs::path trained(const std::string& name, const char* yaml) {
  const fs::path dir = fresh_dir("evex_" + name), config = dir / "config.yaml", run = dir / "run";
  write_file_atomic(config.string(), yaml);
  const CliResult r = run_cli({"train", config.string(), "--out", run.string(), "-q"});
  EXPECT_EQ(r.rc, 0) << r.err;
  return run;
}

Json read_json(const fs::path& p) { return parse_json(read_file(p.string())); }

void expect_one_line_error(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err.rfind("statebench: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_CONTAINS(r.err, needle);
}

TEST(Eval, RepeatsTheRunsEvaluationAndScoresNewLengths) {
  const fs::path run = trained("eval", kParity);
  const std::string summary_before = read_file((run / "summary.json").string());
  const std::string checkpoint_before = read_file((run / "checkpoint.bin").string());

  CliResult r = run_cli({"eval", run.string(), "--length", "16", "--length", "4", "--split", "val", "--split", "test"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_CONTAINS(r.out, "val@16");
  Json record = read_json(run / "eval.json");
  for (const char* key : {"val@16", "val@4", "test@16", "test@4"}) {
    ASSERT_TRUE(record["eval"].contains(key)) << record.dump();
    const Json& e = record["eval"][key];
    EXPECT_EQ(e["examples"], 24);  // the run's train.eval_examples
    EXPECT_EQ(e["checkpoint_step"], 20);
    EXPECT_GE(e["token_accuracy"].get<double>(), 0.0);
    EXPECT_CONTAINS(e["provenance"]["command"].get<std::string>(), " eval " + run.string());
  }
  // Length L of parity with bos is L bits after <bos>: T = L + 1, scored at every bit.
  EXPECT_EQ(record["eval"]["val@16"]["length"], 17);
  EXPECT_EQ(record["eval"]["val@16"]["scored"], 24 * 16);
  EXPECT_EQ(record["eval"]["test@4"]["scored"], 24 * 4);

  // At the training length the run's own evaluation comes back exactly; the earlier keys stay.
  r = run_cli({"eval", run.string()});  // the run's task.eval splits, as many examples as it used
  ASSERT_EQ(r.rc, 0) << r.err;
  record = read_json(run / "eval.json");
  const Json summary = parse_json(summary_before);
  for (const char* field : {"token_accuracy", "sequence_accuracy", "errors", "loss"})
    EXPECT_EQ(record["eval"]["val"][field], summary["eval"]["val"][field]) << field;
  EXPECT_TRUE(record["eval"].contains("val@16"));
  EXPECT_EQ(record["eval"].size(), 5u);

  // The run itself is only read.
  EXPECT_EQ(read_file((run / "summary.json").string()), summary_before);
  EXPECT_EQ(read_file((run / "checkpoint.bin").string()), checkpoint_before);
}

TEST(Eval, BadInputIsOneLineAndLeavesTheRecordAlone) {
  const fs::path run = trained("eval_bad", kParity);
  expect_one_line_error(run_cli({"eval", run.string(), "--split", "nosuch"}), "unknown split 'nosuch'");
  EXPECT_FALSE(fs::exists(run / "eval.json"));
  expect_one_line_error(run_cli({"eval", run.parent_path().string()}), "no summary.json");
  // An unfinished run: its checkpoint exists, its summary does not.
  const fs::path unfinished = run.parent_path() / "unfinished";
  fs::create_directories(unfinished);
  fs::copy_file(run / "checkpoint.bin", unfinished / "checkpoint.bin");
  expect_one_line_error(run_cli({"eval", unfinished.string()}), "finish it first");
  // An eval.json that does not parse is never replaced.
  write_file_atomic((run / "eval.json").string(), "{not json");
  expect_one_line_error(run_cli({"eval", run.string(), "--length", "4"}), "eval.json");
  EXPECT_EQ(read_file((run / "eval.json").string()), "{not json");
}

// The safetensors file: header length, JSON header, data; offsets cover the data exactly.
struct Safetensors {
  Json header;
  std::string data;
};

Safetensors parse_safetensors(const std::string& bytes) {
  Safetensors s;
  uint64_t n = 0;
  EXPECT_GE(bytes.size(), 8u);
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);  // the data starts 8-byte aligned
  s.header = parse_json(bytes.substr(8, n));
  s.data = bytes.substr(8 + n);
  uint64_t covered = 0;
  for (const auto& [name, entry] : s.header.items()) {
    if (name == "__metadata__") continue;
    const uint64_t begin = entry["data_offsets"][0], end = entry["data_offsets"][1];
    EXPECT_EQ(begin, covered) << name;  // in header order, back to back
    covered = end;
  }
  EXPECT_EQ(covered, s.data.size());
  return s;
}

TEST(Export, TensorsAndHeaderRoundTripTheCheckpoint) {
  const fs::path run = trained("export", kHybrid);
  const fs::path out = run.parent_path() / "model.safetensors", check = run.parent_path() / "check.safetensors";
  const CliResult r = run_cli({"export", run.string(), "-o", out.string(), "--check-data", check.string(),
                               "--check-examples", "3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const Safetensors st = parse_safetensors(read_file(out.string()));

  // The checkpoint's parameters, through the library.
  const FinishedRun finished = open_finished_run(run.string());
  EXPECT_EQ(st.header["__metadata__"]["statebench.step"], "12");
  const Json model_meta = parse_json(st.header["__metadata__"]["statebench.model"].get<std::string>());
  const Json task_meta = parse_json(st.header["__metadata__"]["statebench.task"].get<std::string>());
  EXPECT_EQ(model_meta["layers"], Json({"fox", "nope", "path"}));
  EXPECT_EQ(model_meta["norm"], "layernorm");
  EXPECT_EQ(task_meta["name"], "parity");
  EXPECT_EQ(task_meta["params"]["length"], "6");
  const int64_t V = model_meta["vocab_size"];
  EXPECT_EQ(static_cast<int64_t>(task_meta["vocab"].size()), V);
  Transformer<float> loaded(finished.config.model, V);
  load_run_parameters(finished, loaded.params());
  size_t seen = 0;
  for (const ParamView& v : loaded.params().views()) {
    ASSERT_TRUE(st.header.contains(v.name)) << v.name;
    const Json& e = st.header[v.name];
    EXPECT_EQ(e["dtype"], "F32");
    EXPECT_EQ(e["shape"].get<std::vector<int64_t>>(), v.shape) << v.name;
    const size_t begin = e["data_offsets"][0], end = e["data_offsets"][1];
    ASSERT_EQ(end - begin, static_cast<size_t>(v.numel) * 4) << v.name;
    EXPECT_EQ(std::memcmp(st.data.data() + begin, loaded.params().params() + v.offset, end - begin), 0) << v.name;
    ++seen;
  }
  EXPECT_EQ(seen + 1, st.header.size());  // every tensor is a parameter (+ __metadata__)

  // The check data: examples of the first eval split and the float64 model's logits for them.
  const Safetensors cd = parse_safetensors(read_file(check.string()));
  EXPECT_EQ(cd.header["input_ids"]["shape"], Json({3, 6}));
  EXPECT_EQ(cd.header["logits"]["dtype"], "F64");
  EXPECT_EQ(cd.header["logits"]["shape"], Json({3, 6, V}));
  EXPECT_EQ(cd.header["__metadata__"]["statebench.split"], "val");
}

TEST(Export, BadInputWritesNothing) {
  const fs::path run = trained("export_bad", kParity);
  const fs::path out = run.parent_path() / "m.safetensors";
  expect_one_line_error(run_cli({"export", run.string(), "-o", out.string(), "--check-data",
                                 (run.parent_path() / "c.safetensors").string(), "--check-split", "nosuch"}),
                        "unknown split 'nosuch'");
  expect_one_line_error(run_cli({"export", (run.parent_path() / "nowhere").string(), "-o", out.string()}),
                        "does not exist");
  EXPECT_FALSE(fs::exists(out));
}

// Runs a shell command; returns its exit status and output.
std::pair<int, std::string> shell(const std::string& command) {
  std::string out;
  std::FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return {-1, ""};
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A python3 that imports `module`, or "" (tools/README.md says how to install torch).
std::string python_with(const std::string& module) {
  for (const char* py : {"python3", "/usr/bin/python3"})
    if (shell(std::string(py) + " -c 'import " + module + "'").first == 0) return py;
  return "";
}

TEST(Export, CheckScriptMatchesThePyTorchReference) {
  const std::string script = std::string(SB_SOURCE_DIR) + "/tools/check_export.py";
  const std::string py = python_with("json");
  if (py.empty()) GTEST_SKIP() << "no python3: tools/check_export.py not run";
  for (const auto& [name, yaml] : {std::pair{"parity", kParity}, std::pair{"hybrid", kHybrid}}) {
    const fs::path run = trained(std::string("check_") + name, yaml);
    const fs::path out = run.parent_path() / "m.safetensors", check = run.parent_path() / "c.safetensors";
    ASSERT_EQ(run_cli({"export", run.string(), "-o", out.string(), "--check-data", check.string()}).rc, 0);
    // Listing needs only the standard library: it parses and validates every header field.
    const auto [rc, listing] = shell(py + " " + script + " " + out.string());
    EXPECT_EQ(rc, 0) << listing;
    EXPECT_CONTAINS(listing, "layers.0.attn.wq");
    // A truncated file is refused (exit 2), not misread.
    const std::string bytes = read_file(out.string());
    write_file_atomic((run.parent_path() / "cut.safetensors").string(), bytes.substr(0, bytes.size() - 4));
    EXPECT_EQ(shell(py + " " + script + " " + (run.parent_path() / "cut.safetensors").string()).first, 2);
  }
  // The logits check: a python3 whose torch imports (tools/check_export.py exits 3 where none does).
  std::vector<std::string> pythons{py};
  if (py != "/usr/bin/python3" && fs::exists("/usr/bin/python3")) pythons.push_back("/usr/bin/python3");  // Debian's torch
  for (const char* name : {"parity", "hybrid"}) {
    const fs::path dir = fs::path(SB_TEST_TMP) / (std::string("cli_evex_check_") + name);
    const std::string args = " " + script + " " + (dir / "m.safetensors").string() + " " + (dir / "c.safetensors").string() +
                             " --tol 1e-5";
    std::pair<int, std::string> result{3, ""};
    for (const auto& p : pythons)
      if ((result = shell(p + args)).first != 3) break;
    if (result.first == 3)
      GTEST_SKIP() << "PyTorch is not importable (python3 -c 'import torch' fails): the logits parity check was "
                      "not run; tools/README.md says how to install it";
    EXPECT_EQ(result.first, 0) << result.second;
    EXPECT_CONTAINS(result.second, "OK at tolerance 1e-05");
    std::printf("%s", result.second.c_str());
  }
}

}  // namespace
}  // namespace sb::test
