// slurm_launch.cpp: cell states from the sweep directory and squeue, submission of the cells the
// protocol needs as one job array (and a follow-up job for staged protocols), the status text
// (see slurm_launch.hpp).
#include "sweep/slurm_launch.hpp"

#include <unistd.h>

#include <filesystem>
#include <set>

#include "core/error.hpp"
#include "core/utc_time.hpp"
#include "io/atomic_file.hpp"
#include "sweep/manifest.hpp"
#include "sweep/runner.hpp"
#include "train/run_summary.hpp"

namespace sb::sweep {

namespace fs = std::filesystem;

const char* to_string(CellPhase p) {
  switch (p) {
    case CellPhase::done: return "done";
    case CellPhase::running: return "running";
    case CellPhase::queued: return "queued";
    case CellPhase::failed: return "failed";
    case CellPhase::unsubmitted: return "not submitted";
    case CellPhase::waiting: return "waiting";
    case CellPhase::skipped: return "skipped";
  }
  return "?";
}

size_t StudyStatus::count(CellPhase p) const {
  size_t n = 0;
  for (const auto& c : cells) n += c.phase == p;
  return n;
}

namespace {

// Whether another process holds the cell's lock (a task or a local sweep running it now).
bool cell_locked(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / "lock", ec)) return false;
  const int fd = lock_file((dir / "lock").string());
  if (fd < 0) return true;
  ::close(fd);
  return false;
}

// The Slurm task recorded in a summary's provenance, "JOB_INDEX" (or "JOB"), else "".
std::string summary_job(const fs::path& summary) {
  try {
    const RunSummary s = read_run_summary(summary.string());
    if (!s.provenance || !s.provenance->slurm) return "";
    const SlurmJob& j = *s.provenance->slurm;
    if (!j.array_job_id.empty() && j.array_task_id) return fmt::format("{}_{}", j.array_job_id, *j.array_task_id);
    return j.job_id;
  } catch (const Error&) {
    return "";
  }
}

std::string first_line(const std::string& s, size_t max = 240) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > max ? line.substr(0, max) + "..." : line;
}

void write_study_manifest(const Plan& plan, const std::string& out, const StudyStatus& status) {
  Scheduler scheduler(plan);
  for (const auto& cell : plan.cells) {
    const auto r = read_cell_result((fs::path(out) / cell.dir / "summary.json").string(), plan.metric);
    if (r && r->final()) scheduler.restore(cell.index, *r);
  }
  scheduler.settle();
  for (size_t c = 0; c < plan.cells.size(); ++c) {
    const CellPhase p = status.cells[c].phase;
    if ((p == CellPhase::running || p == CellPhase::queued) && scheduler.state(c) == CellState::pending)
      scheduler.start(c);
  }
  ManifestInfo info;
  info.study_source = plan.study.file == "<string>" ? plan.study.file : fs::absolute(plan.study.file).lexically_normal().string();
  info.base_config = base_config_path(plan, out);
  info.started = utc_now();
  try {  // keep the time the sweep first started
    info.started = read_manifest((fs::path(out) / "manifest.json").string()).started;
  } catch (const Error&) {
  }
  info.complete = scheduler.done();
  write_manifest(out, make_manifest(plan, scheduler, info));
}

}  // namespace

StudyStatus study_status(const Plan& plan, const std::string& out, const SlurmJobs& jobs, bool follow_up) {
  StudyStatus st;
  std::vector<std::string> ids;
  for (const auto& j : jobs.jobs) ids.push_back(j.job_id);
  st.queue = query_queue(ids);
  for (const auto& j : jobs.jobs) {
    bool active = false;
    if (j.kind == "follow_up") {
      const QueueEntry* e = st.queue.find(j.job_id);
      active = e && e->active();
    } else {
      for (size_t i = 0; i < j.cells.size() && !active; ++i) {
        const QueueEntry* e = st.queue.find(j.job_id, i);
        active = e && e->active();
      }
    }
    if (active) st.active_jobs.push_back(j.job_id);
  }
  const auto latest = jobs.latest_task();

  Scheduler scheduler(plan);
  std::vector<std::optional<CellResult>> results(plan.cells.size());
  for (const auto& cell : plan.cells) {
    results[cell.index] = read_cell_result((fs::path(out) / cell.dir / "summary.json").string(), plan.metric);
    const auto& r = results[cell.index];
    if (r && (r->final() || follow_up)) scheduler.restore(cell.index, *r);
  }
  scheduler.settle();
  const auto runnable_list = scheduler.runnable();
  const std::set<size_t> runnable(runnable_list.begin(), runnable_list.end());

  st.cells.resize(plan.cells.size());
  for (const auto& cell : plan.cells) {
    CellStatus& cs = st.cells[cell.index];
    const fs::path dir = fs::path(out) / cell.dir;
    const auto& r = results[cell.index];
    const auto task = latest.find(cell.id);
    const bool submitted = task != latest.end();
    if (submitted) cs.job = fmt::format("{}_{}", task->second.first, task->second.second);
    const QueueEntry* q = submitted ? st.queue.find(task->second.first, task->second.second) : nullptr;
    if (r && r->final()) {
      cs.phase = CellPhase::done;
      cs.detail = r->status + (r->metric ? fmt::format(", {}={:.4g}", plan.metric, *r->metric) : "");
      const std::string ran = summary_job(dir / "summary.json");
      cs.job = ran;  // the task that finished it ("" when it ran locally)
      continue;
    }
    if (scheduler.state(cell.index) == CellState::skipped) {
      cs.phase = CellPhase::skipped;
      cs.detail = "the protocol decided its group at an earlier " + plan.stage_axis + " value";
      cs.job.clear();
      continue;
    }
    if (q && q->active()) {
      cs.phase = q->running() ? CellPhase::running : CellPhase::queued;
      cs.detail = q->running() ? fmt::format("on {} for {}", q->node, q->elapsed)
                               : (q->reason == "None" ? q->state : q->reason);
      continue;
    }
    if (cell_locked(dir)) {
      cs.phase = CellPhase::running;
      cs.detail = "by another process (its cell lock is held)";
      continue;
    }
    if (r || submitted) {
      cs.phase = CellPhase::failed;
      if (r) cs.detail = first_line(r->message);
      else if (!st.queue.known) cs.detail = "state unknown: " + st.queue.problem;
      else if (q) cs.detail = fmt::format("the task ended {} without a summary", q->state);
      else cs.detail = "the task ended without a summary";
      if (submitted) cs.log = task_log_path(out, task->second.first, task->second.second);
    } else {
      cs.phase = runnable.count(cell.index) ? CellPhase::unsubmitted : CellPhase::waiting;
      if (cs.phase == CellPhase::waiting) cs.detail = "after an earlier " + plan.stage_axis + " value";
    }
    const bool may_submit = follow_up ? !submitted && !r : true;
    if (runnable.count(cell.index) && may_submit && !(!st.queue.known && submitted)) st.to_submit.push_back(cell.index);
  }
  st.complete = st.count(CellPhase::done) + st.count(CellPhase::skipped) == plan.cells.size();
  return st;
}

std::string status_counts(const StudyStatus& st) {
  std::string s = fmt::format("{}/{} done", st.count(CellPhase::done), st.cells.size());
  for (const CellPhase p : {CellPhase::running, CellPhase::queued, CellPhase::failed, CellPhase::unsubmitted,
                            CellPhase::waiting, CellPhase::skipped}) {
    const size_t n = st.count(p);
    if (n || p == CellPhase::running || p == CellPhase::queued || p == CellPhase::failed)
      s += fmt::format(", {} {}", n, to_string(p));
  }
  return s;
}

std::string format_status(const Plan& plan, const std::string& out, const StudyStatus& st) {
  std::string s = fmt::format("study {} in {}: {}\n", plan.study.name, out, status_counts(st));
  if (!st.queue.known) s += fmt::format("  (Slurm's queue is unknown: {})\n", st.queue.problem);
  const bool all = plan.cells.size() <= 40;
  size_t width = 0;
  for (const auto& c : plan.cells) width = std::max(width, c.id.size());
  for (const auto& cell : plan.cells) {
    const CellStatus& c = st.cells[cell.index];
    if (!all && (c.phase == CellPhase::done || c.phase == CellPhase::skipped)) continue;
    std::string line = fmt::format("  {:<13} {:<{}}", to_string(c.phase), cell.id, width);
    if (!c.job.empty()) line += "  job " + c.job;
    if (!c.detail.empty()) line += (c.job.empty() ? "  " : ": ") + c.detail;
    if (c.phase == CellPhase::failed) {
      line += fmt::format("\n{:<16}log: {}", "", (fs::path(out) / cell.dir / "log.txt").string());
      if (!c.log.empty()) line += ", Slurm log: " + c.log;
    }
    s += line + "\n";
  }
  if (!st.active_jobs.empty()) {
    std::string jobs;
    for (const auto& j : st.active_jobs) jobs += (jobs.empty() ? "" : ", ") + j;
    s += fmt::format("jobs in the queue: {}\n", jobs);
  }
  const size_t unfinished = st.to_submit.size();
  if (st.complete) s += "complete: statebench table " + out + "\n";
  else if (unfinished)
    s += fmt::format("{} cell{} to submit: run the same sweep command (without --status) again\n", unfinished,
                     unfinished == 1 ? "" : "s");
  return s;
}

namespace {

// Writes OUT/slurm/<name> (executable) and returns its path.
std::string write_script(const std::string& out, const std::string& name, const std::string& text) {
  const fs::path path = fs::path(slurm_dir(out)) / name;
  fs::create_directories(path.parent_path() / "logs");
  write_file_atomic(path.string(), text);
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  return path.string();
}

ArrayJob array_job(const Plan& plan, const std::string& out, const SubmitRequest& req, const std::vector<size_t>& cells) {
  ArrayJob job{plan.study.name, out, {}, req.task_command, req.task_args};
  for (const size_t c : cells) job.cells.push_back(plan.cells[c].id);
  return job;
}

// A staged protocol may need a later stage once the submitted cells have ended.
bool staged_more(const Plan& plan, const StudyStatus& st) {
  return !plan.groups.empty() && st.count(CellPhase::waiting) > 0;
}

}  // namespace

std::string dry_run_scripts(const Plan& plan, const std::string& out_dir, const SubmitRequest& req) {
  const std::string out = fs::absolute(out_dir).lexically_normal().string();
  const SlurmJobs jobs = read_slurm_jobs(out);
  const StudyStatus st = study_status(plan, out, jobs, req.follow_up);
  std::string s = fmt::format("# {}\n", status_counts(st));
  if (st.to_submit.empty()) return s + "# nothing to submit\n";
  size_t k = 1;
  for (const auto& j : jobs.jobs) k += j.kind == "array";
  const std::string script = (fs::path(slurm_dir(out)) / fmt::format("submit-{}.sh", k)).string();
  std::string cmd;
  for (const auto& a : sbatch_command(req.slurm, script)) cmd += (cmd.empty() ? "" : " ") + shell_quote(a);
  s += fmt::format("# {} cells would be submitted as one job array: {}\n", st.to_submit.size(), cmd);
  s += array_script(req.slurm, array_job(plan, out, req, st.to_submit));
  if (staged_more(plan, st)) {
    s += "\n# and a follow-up job that submits the next stage once the array has ended:\n";
    s += follow_up_script(req.slurm, {plan.study.name, out, "<array job id>", req.workdir, req.resubmit});
  }
  return s;
}

SubmitResult submit_study(const Plan& plan, const std::string& out_dir, const SubmitRequest& req) {
  const std::string out = fs::absolute(out_dir).lexically_normal().string();
  if (find_on_path("sbatch").empty())
    fail("sbatch is not on PATH: --launcher slurm needs the Slurm client commands (sbatch, squeue)");
  fs::create_directories(out);
  FdCloser lock{lock_file((fs::path(out) / "sweep.lock").string())};
  if (lock.fd < 0) fail("another statebench sweep is running or submitting in '{}' (it holds {}/sweep.lock)", out, out);
  prepare_sweep_dir(plan, out);
  SlurmJobs jobs = read_slurm_jobs(out);
  SubmitResult result;
  result.status = study_status(plan, out, jobs, req.follow_up);
  const StudyStatus& st = result.status;
  if (!st.queue.known && !jobs.jobs.empty())
    fail("cannot tell which cells are still queued ({}); nothing submitted", st.queue.problem);
  if (st.to_submit.empty()) {
    write_study_manifest(plan, out, st);
    return result;
  }
  // Array task i runs cell i: the manifest written first is what the tasks read.
  StudyStatus pending = st;
  for (const size_t c : st.to_submit) pending.cells[c].phase = CellPhase::queued;
  write_study_manifest(plan, out, pending);
  size_t k = 1;  // this submission's number: submit-K.sh (and submit-K-next.sh)
  for (const auto& j : jobs.jobs) k += j.kind == "array";
  const std::string name = fmt::format("submit-{}.sh", k);
  const std::string script = write_script(out, name, array_script(req.slurm, array_job(plan, out, req, st.to_submit)));
  std::string job_id;
  try {
    job_id = submit_batch(req.slurm, script);
  } catch (const Error&) {
    std::error_code ec;
    fs::remove(script, ec);
    write_study_manifest(plan, out, st);  // nothing queued after all
    throw;
  }
  result.cells = st.to_submit;
  result.job_id = job_id;
  SlurmSubmission sub{job_id, "array", utc_now(), "slurm/" + name, {}, ""};
  for (const size_t c : st.to_submit) sub.cells.push_back(plan.cells[c].id);
  jobs.jobs.push_back(std::move(sub));
  write_slurm_jobs(out, jobs);

  if (staged_more(plan, st) && !req.resubmit.empty()) {
    const std::string next = fmt::format("submit-{}-next.sh", k);
    const std::string path =
        write_script(out, next, follow_up_script(req.slurm, {plan.study.name, out, job_id, req.workdir, req.resubmit}));
    result.follow_up_job = submit_batch(req.slurm, path);  // an error here leaves the array (re-run to continue)
    jobs.jobs.push_back({result.follow_up_job, "follow_up", utc_now(), "slurm/" + next, {}, job_id});
    write_slurm_jobs(out, jobs);
  }
  return result;
}

void refresh_manifest(const Plan& plan, const std::string& out_dir, const StudyStatus& status) {
  const std::string out = fs::absolute(out_dir).lexically_normal().string();
  if (!fs::exists(fs::path(out) / "manifest.json")) return;
  FdCloser lock{lock_file((fs::path(out) / "sweep.lock").string())};
  if (lock.fd < 0) return;  // a sweep or submission is writing it
  write_study_manifest(plan, out, status);
}

}  // namespace sb::sweep
