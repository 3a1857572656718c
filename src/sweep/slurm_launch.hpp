// slurm_launch.hpp: a study on Slurm. Each cell's state (done / running / queued / failed / not
// submitted / waiting for an earlier stage / skipped) from the sweep directory and squeue, and the
// submission of the cells the protocol needs now as one job array (plus, for a staged protocol,
// a follow-up job that submits the next stage when the array has ended). Docs: docs/sweeps.md.
#pragma once
#include <string>
#include <vector>

#include "sweep/plan.hpp"
#include "sweep/slurm.hpp"

namespace sb::sweep {

enum class CellPhase { done, running, queued, failed, unsubmitted, waiting, skipped };
const char* to_string(CellPhase p);

struct CellStatus {
  CellPhase phase = CellPhase::unsubmitted;
  std::string detail;  // done: status and metric; queued: squeue's reason; failed: why
  std::string job;     // "JOB_INDEX" of the array task that last ran it (or runs it), else ""
  std::string log;     // that task's Slurm log (failed cells)
};

struct StudyStatus {
  std::vector<CellStatus> cells;         // per plan cell
  std::vector<size_t> to_submit;         // cells a submission would send now (protocol order)
  std::vector<std::string> active_jobs;  // our jobs (arrays, follow-ups) still queued or running
  QueueView queue;
  bool complete = false;                 // every cell done or skipped
  size_t count(CellPhase p) const;
};

// The study's state in out_dir. follow_up: called by the follow-up job, which must not loop on
// failures: cells that failed count as finished for the protocol, and cells submitted before are
// not submitted again (a re-run by hand resubmits them).
StudyStatus study_status(const Plan& plan, const std::string& out_dir, const SlurmJobs& jobs, bool follow_up);

// The status as text: a counts line, then one line per cell not done (every cell for small studies).
std::string format_status(const Plan& plan, const std::string& out_dir, const StudyStatus& status);
// One line: "3/8 done, 2 running, 3 queued, 0 failed".
std::string status_counts(const StudyStatus& status);

struct SubmitRequest {
  SlurmOptions slurm;
  std::vector<std::string> task_command;  // EXE [--plugin F]... sweep-task OUT (the cell id follows)
  std::vector<std::string> task_args;     // --device D [--threads N] [--train-exe X]
  std::vector<std::string> resubmit;      // the follow-up's command: this submission again
  std::string workdir;                    // where the follow-up runs it
  bool follow_up = false;                 // this is the follow-up job itself
};

struct SubmitResult {
  std::vector<size_t> cells;  // submitted (array task i = cells[i])
  std::string job_id, follow_up_job;
  StudyStatus status;         // before submitting
};

// Takes OUT/sweep.lock, prepares OUT, submits what study_status says is needed (nothing when all
// are done or in flight), records the jobs in OUT/slurm/jobs.json and writes the manifest. On a
// rejected submission: sb::Error, nothing recorded.
SubmitResult submit_study(const Plan& plan, const std::string& out_dir, const SubmitRequest& request);

// The scripts submit_study would write now, for --slurm-dry-run (writes nothing).
std::string dry_run_scripts(const Plan& plan, const std::string& out_dir, const SubmitRequest& request);

// Rewrites OUT/manifest.json (cells from their summaries, queued and running ones as running) when
// it exists and no other process holds OUT/sweep.lock.
void refresh_manifest(const Plan& plan, const std::string& out_dir, const StudyStatus& status);

}  // namespace sb::sweep
