// test_slurm_script.cpp: the Slurm launcher's pieces that need no Slurm: the batch scripts (every
// option where sbatch reads it, the cells in array order, quoting), option checks, squeue output
// parsing, OUT/slurm/jobs.json, the Slurm ids in a summary's provenance (old summaries still load),
// and the status of cells from the sweep directory alone.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/atomic_file.hpp"
#include "io/json.hpp"
#include "sweep/slurm.hpp"
#include "sweep/slurm_launch.hpp"
#include "test_util.hpp"
#include "train/run_summary.hpp"

namespace sb::sweep {
namespace {

namespace fs = std::filesystem;

TEST(SlurmScript, ArrayScriptCarriesEveryOptionAndTheCellsInArrayOrder) {
  SlurmOptions o;
  o.partition = "gpu";
  o.account = "lab42";
  o.time = "2:00:00";
  o.mem = "16G";
  o.gpus_per_task = 1;
  o.cpus_per_task = 8;
  o.max_running = 4;
  o.sbatch_args = {"--qos=high"};
  const ArrayJob job{"a5", "/scratch/a5", {"n_layers=1,seed=0-aa", "it's-odd"},
                     {"/opt/sb/statebench", "--plugin", "/p/my task.so", "sweep-task", "/scratch/a5"},
                     {"--device", "cuda:0"}};
  const std::string s = array_script(o, job);
  for (const char* line : {"#!/bin/bash\n", "#SBATCH --job-name=sb-a5\n", "#SBATCH --array=0-1%4\n",
                           "#SBATCH --output=/scratch/a5/slurm/logs/%A_%a.out\n", "#SBATCH --partition=gpu\n",
                           "#SBATCH --account=lab42\n", "#SBATCH --time=2:00:00\n", "#SBATCH --cpus-per-task=8\n",
                           "#SBATCH --gpus-per-task=1\n", "#SBATCH --mem=16G\n",
                           "cells=(\n  n_layers=1,seed=0-aa\n  'it'\\''s-odd'\n)\n",
                           "exec /opt/sb/statebench --plugin '/p/my task.so' sweep-task /scratch/a5 "
                           "\"${cells[$SLURM_ARRAY_TASK_ID]}\" --device cuda:0\n"})
    EXPECT_CONTAINS(s, line);
  EXPECT_EQ(s.find("--qos"), std::string::npos);  // extra options go on sbatch's command line
  EXPECT_EQ(sbatch_command(o, "/x/submit-1.sh"),
            (std::vector<std::string>{"sbatch", "--parsable", "--qos=high", "/x/submit-1.sh"}));

  SlurmOptions plain;  // the cluster's defaults: no partition, account, time, memory or GPU lines
  const std::string p = array_script(plain, {"s", "/o", {"c"}, {"sb", "sweep-task", "/o"}, {}});
  for (const char* absent : {"--partition", "--account", "--time", "--mem", "--gpus-per-task"})
    EXPECT_EQ(p.substr(0, p.find("cells=")).find(std::string("#SBATCH ") + absent), std::string::npos) << absent;
  EXPECT_CONTAINS(p, "#SBATCH --array=0-0\n");
}

TEST(SlurmScript, FollowUpWaitsForTheArrayAndRerunsTheSubmission) {
  SlurmOptions o;
  o.partition = "cpu";
  const std::string s = follow_up_script(o, {"md", "/o", "1234", "/home/me", {"/opt/statebench", "sweep", "/s.yaml",
                                                                               "--slurm-follow-up"}});
  EXPECT_CONTAINS(s, "#SBATCH --dependency=afterany:1234\n");
  EXPECT_CONTAINS(s, "#SBATCH --partition=cpu\n");
  EXPECT_CONTAINS(s, "cd /home/me\nexec /opt/statebench sweep /s.yaml --slurm-follow-up\n");
}

TEST(SlurmScript, OptionsSbatchWouldMisreadAreRefused) {
  auto error = [](const SlurmOptions& o) { return ::error_of([&] { check_slurm_options(o); }); };
  SlurmOptions o;
  EXPECT_EQ(error(o), "<no error>");
  o.partition = "a b";
  EXPECT_CONTAINS(error(o), "--partition 'a b'");
  o = {};
  o.cpus_per_task = 0;
  EXPECT_CONTAINS(error(o), "--cpus-per-task 0");
  o = {};
  o.sbatch_args = {"qos=high"};
  EXPECT_CONTAINS(error(o), "--sbatch-arg 'qos=high': expected an sbatch option");
  o.sbatch_args = {"--array=0-3"};
  EXPECT_CONTAINS(error(o), "statebench sets --array itself");
  o.sbatch_args = {"-o/tmp/x"};
  EXPECT_CONTAINS(error(o), "statebench sets -o itself");
  EXPECT_CONTAINS(::error_of([] { array_script({}, {"s", "/my out", {"c"}, {"sb"}, {}}); }), "--out '/my out'");
}

TEST(SlurmScript, SqueueLinesBecomeArrayTasksAndJobs) {
  const auto q = parse_squeue("12|0|RUNNING|None|node3|1:02\n12|1|PENDING|JobArrayTaskLimit||0:00\n"
                              "13|N/A|PENDING|Dependency||0:00\n12|2|CANCELLED|None|node3|0:05\n\n");
  ASSERT_EQ(q.size(), 4u);
  EXPECT_TRUE(q.at("12_0").running());
  EXPECT_EQ(q.at("12_0").node, "node3");
  EXPECT_TRUE(q.at("12_1").active());
  EXPECT_FALSE(q.at("12_1").running());
  EXPECT_EQ(q.at("12_1").reason, "JobArrayTaskLimit");
  EXPECT_TRUE(q.at("13").active());
  EXPECT_FALSE(q.at("12_2").active());
}

TEST(SlurmScript, JobsRecordRoundTripsAndNamesEachCellsLatestTask) {
  const fs::path out = fs::path(SB_TEST_TMP) / "slurm_jobs_record";
  fs::remove_all(out);
  EXPECT_TRUE(read_slurm_jobs(out.string()).jobs.empty());
  SlurmJobs jobs;
  jobs.jobs.push_back({"7", "array", "2026-01-01T00:00:00Z", "slurm/submit-1.sh", {"a", "b"}, ""});
  jobs.jobs.push_back({"8", "follow_up", "2026-01-01T00:00:01Z", "slurm/submit-1-next.sh", {}, "7"});
  jobs.jobs.push_back({"9", "array", "2026-01-01T00:00:02Z", "slurm/submit-2.sh", {"b"}, ""});
  write_slurm_jobs(out.string(), jobs);
  const SlurmJobs back = read_slurm_jobs(out.string());
  ASSERT_EQ(back.jobs.size(), 3u);
  EXPECT_EQ(back.jobs[1].kind, "follow_up");
  EXPECT_EQ(back.jobs[1].after, "7");
  EXPECT_EQ(back.jobs[2].cells, std::vector<std::string>{"b"});
  const auto latest = back.latest_task();
  EXPECT_EQ(latest.at("a"), std::make_pair(std::string("7"), size_t{0}));
  EXPECT_EQ(latest.at("b"), std::make_pair(std::string("9"), size_t{0}));
  write_file_atomic((out / "slurm" / "jobs.json").string(), "{\"jobs\": 3}");
  EXPECT_CONTAINS(::error_of([&] { read_slurm_jobs(out.string()); }), "expected a \"jobs\" list");
}

TEST(SlurmScript, ProvenanceRecordsSlurmIdsAndPluginsAndOldSummariesLoad) {
  RunSummary s;
  s.status = "completed";
  s.provenance = Provenance{"abc", "0.1.0", "cpu", "2026-01-01T00:00:00Z", "statebench train", "node3",
                            {"/p/libmy_task.so"}, SlurmJob{"1237", "1234", 3}};
  const RunSummary back = parse_run_summary(nlohmann::ordered_json(s).dump());
  ASSERT_TRUE(back.provenance && back.provenance->slurm);
  EXPECT_EQ(back.provenance->slurm->job_id, "1237");
  EXPECT_EQ(back.provenance->slurm->array_job_id, "1234");
  EXPECT_EQ(back.provenance->slurm->array_task_id, 3);
  EXPECT_EQ(back.provenance->plugins, std::vector<std::string>{"/p/libmy_task.so"});
  const RunSummary old = parse_run_summary(
      R"({"status": "completed", "provenance": {"commit": "abc", "command": "statebench train c.yaml"}})");
  ASSERT_TRUE(old.provenance.has_value());
  EXPECT_FALSE(old.provenance->slurm.has_value());
  EXPECT_TRUE(old.provenance->plugins.empty());
  const std::string text = nlohmann::ordered_json(old).dump();
  EXPECT_EQ(text.find("slurm"), std::string::npos);  // not written when absent
  EXPECT_EQ(text.find("plugins"), std::string::npos);
}

TEST(SlurmScript, CurrentJobComesFromTheTasksEnvironment) {
  ::unsetenv("SLURM_JOB_ID");
  EXPECT_FALSE(current_slurm_job().has_value());
  ::setenv("SLURM_JOB_ID", "1237", 1);
  ::setenv("SLURM_ARRAY_JOB_ID", "1234", 1);
  ::setenv("SLURM_ARRAY_TASK_ID", "3", 1);
  const auto job = current_slurm_job();
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->job_id, "1237");
  EXPECT_EQ(job->array_job_id, "1234");
  EXPECT_EQ(job->array_task_id, 3);
  for (const char* v : {"SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"}) ::unsetenv(v);
}

}  // namespace
}  // namespace sb::sweep
