// slurm.hpp: what `statebench sweep --launcher slurm` needs from Slurm: the options users set, the
// batch scripts (one job array per submission: array task i runs cell i through `statebench
// sweep-task`; a follow-up job that submits a staged protocol's next stage), running sbatch and
// squeue, the record of submitted jobs (OUT/slurm/jobs.json) and the Slurm job a process runs in.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "train/run_summary.hpp"

namespace sb::sweep {

struct SlurmOptions {
  std::string partition, account, time, mem;  // "" = the cluster's default
  int gpus_per_task = 0;
  int cpus_per_task = 1;
  int max_running = 0;                        // the array's %N (0: no cap)
  std::vector<std::string> sbatch_args;       // extra sbatch options, verbatim (e.g. --qos=high)
};
// sb::Error naming the option for values sbatch would misread (spaces, quotes) or misuse.
void check_slurm_options(const SlurmOptions& options);

// What one job array runs: array task i runs cells[i] of the sweep in out_dir.
struct ArrayJob {
  std::string study_name;
  std::string out_dir;                  // absolute
  std::vector<std::string> cells;       // cell ids
  std::vector<std::string> command;     // the task's command up to the cell id: EXE [--plugin F]... sweep-task OUT
  std::vector<std::string> task_args;   // after the cell id: --device D [--threads N] [--train-exe X]
};
std::string array_script(const SlurmOptions& options, const ArrayJob& job);

// A job that starts after job `after` ended (however it ended) and runs `command` in `workdir`.
struct FollowUpJob {
  std::string study_name, out_dir, after, workdir;
  std::vector<std::string> command;
};
std::string follow_up_script(const SlurmOptions& options, const FollowUpJob& job);

// `sbatch --parsable EXTRA... SCRIPT` -> the job id. sb::Error with sbatch's own message (one line)
// when sbatch is not on PATH, cannot run or rejects the job.
std::string submit_batch(const SlurmOptions& options, const std::string& script_path);
std::vector<std::string> sbatch_command(const SlurmOptions& options, const std::string& script_path);

// The full path of `program` found on PATH, or "".
std::string find_on_path(const std::string& program);

struct ProgramOutput {
  int exit_code = 0;
  std::string out, err;
};
// Runs argv (argv[0] looked up on PATH) with stdin from /dev/null; sb::Error if it cannot start or
// does not end within timeout_s (then it is killed).
ProgramOutput run_program(const std::vector<std::string>& argv, double timeout_s = 120);

// `text` as one word for a POSIX shell: as is when plain, else in single quotes.
std::string shell_quote(const std::string& text);

// ---- OUT/slurm/jobs.json: every job submitted for the sweep, in order ---------------------------

struct SlurmSubmission {
  std::string job_id;
  std::string kind = "array";      // array | follow_up
  std::string submitted;           // ISO-8601 UTC
  std::string script;              // relative to OUT
  std::vector<std::string> cells;  // array: cells[i] is array task i
  std::string after;               // follow_up: the job it waits for
};

struct SlurmJobs {
  std::vector<SlurmSubmission> jobs;
  // The last array task that ran each cell: cell id -> (job id, array index).
  std::map<std::string, std::pair<std::string, size_t>> latest_task() const;
};

std::string slurm_dir(const std::string& out_dir);              // OUT/slurm
std::string task_log_path(const std::string& out_dir, const std::string& job_id, size_t index);
SlurmJobs read_slurm_jobs(const std::string& out_dir);           // empty when absent; sb::Error if unreadable
void write_slurm_jobs(const std::string& out_dir, const SlurmJobs& jobs);  // atomically

// ---- the queue ------------------------------------------------------------------------------------

struct QueueEntry {
  std::string state;   // squeue's state: PENDING, RUNNING, COMPLETED, CANCELLED, FAILED, TIMEOUT, ...
  std::string reason;  // why pending (or how it ended), "None" when nothing to say
  std::string node, elapsed;
  bool active() const;   // still queued or running
  bool running() const;  // RUNNING, COMPLETING, CONFIGURING, ...
};

struct QueueView {
  bool known = false;   // squeue answered
  std::string problem;  // why not
  std::map<std::string, QueueEntry> tasks;  // "JOB_INDEX" for array tasks, "JOB" for plain jobs
  const QueueEntry* find(const std::string& job_id, std::optional<size_t> index = std::nullopt) const;
};

// squeue's lines for these jobs (recently ended ones included, as long as the controller keeps them).
QueueView query_queue(const std::vector<std::string>& job_ids);
// Parses `squeue -h -r -o '%F|%K|%T|%r|%N|%M'` output.
std::map<std::string, QueueEntry> parse_squeue(const std::string& text);

// The Slurm job this process runs in (SLURM_JOB_ID, SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID).
std::optional<SlurmJob> current_slurm_job();

}  // namespace sb::sweep
