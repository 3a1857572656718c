// slurm.cpp: Slurm's side of `sweep --launcher slurm` (see slurm.hpp): batch scripts, sbatch and
// squeue as child processes, OUT/slurm/jobs.json, and the job ids from a task's environment.
#include "sweep/slurm.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/json.hpp"

namespace sb::sweep {

namespace fs = std::filesystem;

namespace {

// A value that goes into an #SBATCH line or a log path: no spaces, quotes or control characters.
void check_word(const std::string& value, const std::string& option) {
  for (const unsigned char c : value)
    if (c <= ' ' || c == 0x7F || c == '\'' || c == '"' || c == '\\')
      fail("{} '{}': no spaces, quotes or backslashes allowed", option, value);
}

std::string sbatch_line(const std::string& option, const std::string& value) {
  return "#SBATCH --" + option + "=" + value + "\n";
}

// The #SBATCH lines both scripts share: partition, account, time, extra options stay on sbatch's
// command line (sbatch_command), where no quoting can go wrong.
std::string common_lines(const SlurmOptions& o) {
  std::string s;
  if (!o.partition.empty()) s += sbatch_line("partition", o.partition);
  if (!o.account.empty()) s += sbatch_line("account", o.account);
  if (!o.time.empty()) s += sbatch_line("time", o.time);
  return s;
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + shell_quote(a);
  return s;
}

}  // namespace

void check_slurm_options(const SlurmOptions& o) {
  check_word(o.partition, "--partition");
  check_word(o.account, "--account");
  check_word(o.time, "--time");
  check_word(o.mem, "--mem");
  if (o.gpus_per_task < 0) fail("--gpus-per-task {}: expected 0 or more", o.gpus_per_task);
  if (o.cpus_per_task < 1) fail("--cpus-per-task {}: expected 1 or more", o.cpus_per_task);
  if (o.max_running < 0) fail("--max-running {}: expected a positive number (0 = no cap)", o.max_running);
  for (const auto& a : o.sbatch_args) {
    if (a.size() < 2 || a[0] != '-') fail("--sbatch-arg '{}': expected an sbatch option, e.g. --sbatch-arg=--qos=high", a);
    for (const char* own : {"--array", "-a", "--output", "-o", "--error", "-e", "--parsable", "--wrap"})
      if (a == own || a.rfind(std::string(own) + "=", 0) == 0 || (std::strlen(own) == 2 && a.rfind(own, 0) == 0))
        fail("--sbatch-arg '{}': statebench sets {} itself", a, own);
  }
}

std::string shell_quote(const std::string& text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) {
    return std::isalnum(c) || std::strchr("_./=:,@%+-", c) != nullptr;
  });
  if (plain) return text;
  std::string s = "'";
  for (const char c : text) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return s + "'";
}

std::string array_script(const SlurmOptions& o, const ArrayJob& job) {
  if (job.cells.empty()) fail("no cells to submit");
  check_word(job.out_dir, "--out");
  if (job.out_dir.find('%') != std::string::npos) fail("--out '{}': Slurm log paths cannot contain '%'", job.out_dir);
  std::string s = "#!/bin/bash\n";
  s += fmt::format("# statebench sweep '{}': {} cells as one Slurm job array (statebench sweep --launcher slurm).\n",
                   job.study_name, job.cells.size());
  s += "# Array task i runs cell i below in OUT/cells/<id>/ with its lock, checkpoint and summary.json:\n";
  s += "# a repeated or requeued task resumes the cell or finds it finished, never runs it twice.\n";
  s += sbatch_line("job-name", "sb-" + job.study_name);
  s += sbatch_line("array", fmt::format("0-{}{}", job.cells.size() - 1,
                                        o.max_running > 0 ? fmt::format("%{}", o.max_running) : ""));
  s += sbatch_line("output", (fs::path(slurm_dir(job.out_dir)) / "logs" / "%A_%a.out").string());
  s += sbatch_line("open-mode", "append");
  s += common_lines(o);
  s += sbatch_line("ntasks", "1");
  s += sbatch_line("cpus-per-task", std::to_string(o.cpus_per_task));
  if (o.gpus_per_task > 0) s += sbatch_line("gpus-per-task", std::to_string(o.gpus_per_task));
  if (!o.mem.empty()) s += sbatch_line("mem", o.mem);
  s += "set -eu\ncells=(\n";
  for (const auto& id : job.cells) s += "  " + shell_quote(id) + "\n";
  s += ")\n";
  s += "exec " + command_line(job.command) + " \"${cells[$SLURM_ARRAY_TASK_ID]}\"";
  if (!job.task_args.empty()) s += " " + command_line(job.task_args);
  return s + "\n";
}

std::string follow_up_script(const SlurmOptions& o, const FollowUpJob& job) {
  std::string s = "#!/bin/bash\n";
  s += fmt::format("# statebench sweep '{}': once job array {} has ended, submit the cells the protocol needs next.\n",
                   job.study_name, job.after);
  s += sbatch_line("job-name", "sb-" + job.study_name + "-next");
  s += sbatch_line("output", (fs::path(slurm_dir(job.out_dir)) / "logs" / "%j.out").string());
  s += sbatch_line("dependency", "afterany:" + job.after);
  s += sbatch_line("kill-on-invalid-dep", "yes");
  s += common_lines(o);
  s += sbatch_line("ntasks", "1");
  s += sbatch_line("cpus-per-task", "1");
  s += "set -eu\ncd " + shell_quote(job.workdir) + "\n";
  s += "exec " + command_line(job.command) + "\n";
  return s;
}

std::string find_on_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path p = fs::path(dir.empty() ? "." : dir) / program;
    std::error_code ec;
    if (fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

ProgramOutput run_program(const std::vector<std::string>& argv, double timeout_s) {
  if (argv.empty()) fail("run_program: no program");
  const std::string exe = find_on_path(argv[0]);
  if (exe.empty()) fail("'{}' is not on PATH", argv[0]);
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) fail("cannot run {}: pipe: {}", argv[0], std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]), ::close(out[1]);
    fail("cannot run {}: pipe: {}", argv[0], std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (const int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    fail("cannot run {}: fork: {}", argv[0], std::strerror(errno));
  }
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execv(exe.c_str(), cargv.data());
    _exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  ProgramOutput r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  bool timed_out = false;
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    if (::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000))) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) fail("{} did not answer within {:g} s", argv[0], timeout_s);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

namespace {

// The last non-empty line of a program's error output, "sbatch: error: " and the like removed.
std::string last_line(const std::string& text) {
  std::string line, last;
  std::stringstream in(text);
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  for (const char* prefix : {"sbatch: error: ", "squeue: error: ", "error: "})
    if (last.rfind(prefix, 0) == 0) last = last.substr(std::strlen(prefix));
  return last;
}

}  // namespace

std::vector<std::string> sbatch_command(const SlurmOptions& o, const std::string& script_path) {
  std::vector<std::string> argv{"sbatch", "--parsable"};
  argv.insert(argv.end(), o.sbatch_args.begin(), o.sbatch_args.end());
  argv.push_back(script_path);
  return argv;
}

std::string submit_batch(const SlurmOptions& o, const std::string& script_path) {
  if (find_on_path("sbatch").empty())
    fail("sbatch is not on PATH: --launcher slurm needs the Slurm client commands (sbatch, squeue)");
  const ProgramOutput r = run_program(sbatch_command(o, script_path));
  const std::string id = r.out.substr(0, r.out.find_first_of(";\n"));
  const bool numeric = !id.empty() && id.find_first_not_of("0123456789") == std::string::npos;
  if (r.exit_code != 0 || !numeric) {
    std::string why = last_line(r.err);
    if (why.empty()) why = r.exit_code ? fmt::format("exit code {}", r.exit_code) : "no job id in its output";
    std::string hint;
    if (why.find("partition") != std::string::npos) {
      hint = o.partition.empty() ? " (no --partition given: the cluster has no default?)"
                                 : fmt::format(" (--partition {})", o.partition);
    } else if (why.find("node configuration") != std::string::npos || why.find("Memory") != std::string::npos ||
               why.find("gres") != std::string::npos) {
      hint = fmt::format(" (asked per cell: --cpus-per-task {}{}{})", o.cpus_per_task,
                         o.gpus_per_task ? fmt::format(", --gpus-per-task {}", o.gpus_per_task) : "",
                         o.mem.empty() ? "" : ", --mem " + o.mem);
    }
    fail("sbatch rejected the job: {}{}", why, hint);
  }
  return id;
}

// ---- jobs.json --------------------------------------------------------------------------------

std::map<std::string, std::pair<std::string, size_t>> SlurmJobs::latest_task() const {
  std::map<std::string, std::pair<std::string, size_t>> out;
  for (const auto& j : jobs)
    for (size_t i = 0; i < j.cells.size(); ++i) out[j.cells[i]] = {j.job_id, i};
  return out;
}

std::string slurm_dir(const std::string& out_dir) { return (fs::path(out_dir) / "slurm").string(); }

std::string task_log_path(const std::string& out_dir, const std::string& job_id, size_t index) {
  return (fs::path(slurm_dir(out_dir)) / "logs" / fmt::format("{}_{}.out", job_id, index)).string();
}

SlurmJobs read_slurm_jobs(const std::string& out_dir) {
  const std::string path = (fs::path(slurm_dir(out_dir)) / "jobs.json").string();
  SlurmJobs out;
  if (!fs::exists(path)) return out;
  try {
    const Json j = parse_json(read_file(path));
    const Json* jobs = json_field(j, "jobs");
    if (!jobs || !jobs->is_array()) fail("expected a \"jobs\" list");
    for (const Json& x : *jobs) {
      SlurmSubmission s;
      if (const Json* v = json_field(x, "job_id")) s.job_id = json_text(*v);
      if (const Json* v = json_field(x, "kind")) s.kind = json_text(*v);
      if (const Json* v = json_field(x, "submitted")) s.submitted = json_text(*v);
      if (const Json* v = json_field(x, "script")) s.script = json_text(*v);
      if (const Json* v = json_field(x, "after")) s.after = json_text(*v);
      if (const Json* v = json_field(x, "cells"); v && v->is_array())
        for (const Json& c : *v) s.cells.push_back(json_text(c));
      if (s.job_id.empty()) fail("a job without \"job_id\"");
      out.jobs.push_back(std::move(s));
    }
  } catch (const Error& e) {
    fail("'{}': {}", path, e.what());
  }
  return out;
}

void write_slurm_jobs(const std::string& out_dir, const SlurmJobs& jobs) {
  std::string text = "{\"format\": \"statebench-slurm-jobs\", \"version\": 1, \"jobs\": [";
  for (size_t i = 0; i < jobs.jobs.size(); ++i) {
    const SlurmSubmission& s = jobs.jobs[i];
    Json j = Json::object();
    j["job_id"] = s.job_id;
    j["kind"] = s.kind;
    j["submitted"] = s.submitted;
    j["script"] = s.script;
    if (s.kind == "follow_up") j["after"] = s.after;
    else j["cells"] = s.cells;
    text += (i ? ",\n  " : "\n  ") + j.dump();
  }
  text += jobs.jobs.empty() ? "]}\n" : "\n]}\n";
  fs::create_directories(slurm_dir(out_dir));
  write_file_atomic((fs::path(slurm_dir(out_dir)) / "jobs.json").string(), text);
}

// ---- the queue --------------------------------------------------------------------------------

bool QueueEntry::active() const {
  static const char* kEnded[] = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
                                 "PREEMPTED", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"};
  return std::none_of(std::begin(kEnded), std::end(kEnded), [&](const char* s) { return state == s; });
}

bool QueueEntry::running() const {
  return state == "RUNNING" || state == "COMPLETING" || state == "CONFIGURING" || state == "SIGNALING" ||
         state == "STAGE_OUT";
}

const QueueEntry* QueueView::find(const std::string& job_id, std::optional<size_t> index) const {
  const auto it = tasks.find(index ? fmt::format("{}_{}", job_id, *index) : job_id);
  return it == tasks.end() ? nullptr : &it->second;
}

std::map<std::string, QueueEntry> parse_squeue(const std::string& text) {
  std::map<std::string, QueueEntry> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string x; std::getline(fields, x, '|');) f.push_back(x);
    if (f.size() < 4 || f[0].empty()) continue;
    QueueEntry e{f[2], f[3], f.size() > 4 ? f[4] : "", f.size() > 5 ? f[5] : ""};
    const bool array_task = !f[1].empty() && f[1].find_first_not_of("0123456789") == std::string::npos;
    out[array_task ? f[0] + "_" + f[1] : f[0]] = e;
  }
  return out;
}

QueueView query_queue(const std::vector<std::string>& job_ids) {
  QueueView v;
  if (job_ids.empty()) {
    v.known = true;
    return v;
  }
  if (find_on_path("squeue").empty()) {
    v.problem = "squeue is not on PATH";
    return v;
  }
  std::string list;
  for (const auto& id : job_ids) list += (list.empty() ? "" : ",") + id;
  try {
    const ProgramOutput r = run_program({"squeue", "-h", "-r", "-t", "all", "-j", list, "-o", "%F|%K|%T|%r|%N|%M"}, 60);
    if (r.exit_code != 0 && r.err.find("Invalid job id") == std::string::npos) {  // all of them forgotten: none queued
      v.problem = "squeue failed: " + last_line(r.err);
      return v;
    }
    v.tasks = parse_squeue(r.out);
    v.known = true;
  } catch (const Error& e) {
    v.problem = e.what();
  }
  return v;
}

std::optional<SlurmJob> current_slurm_job() {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job || !*job) return std::nullopt;
  SlurmJob s;
  s.job_id = job;
  if (const char* a = std::getenv("SLURM_ARRAY_JOB_ID")) s.array_job_id = a;
  if (const char* t = std::getenv("SLURM_ARRAY_TASK_ID"); t && *t && std::strspn(t, "0123456789") == std::strlen(t) &&
                                                          std::strlen(t) < 12)
    s.array_task_id = std::stoll(t);
  return s;
}

}  // namespace sb::sweep
