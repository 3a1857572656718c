// plugin_loader.cpp: loads task plugins through the C ABI of include/statebench/plugin_abi.h
// (versions 1 and 2) and adapts each plugin task to sb::Task (PluginTask). Everything a plugin returns is validated;
// every failure is a one-line sb::Error naming the plugin file. Libraries are never unloaded.
#include "tasks/plugin_loader.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>

#include "core/error.hpp"
#include "statebench/plugin_abi.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxSeqLen = int64_t{1} << 30;

// The message a plugin wrote into an error buffer: bounded, on one line, never empty.
std::string plugin_message(char* err, size_t size, const char* fallback) {
  err[size - 1] = '\0';
  std::string msg(err);
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  return msg.empty() ? fallback : msg;
}

[[noreturn]] void invalid(const std::string& file, const std::string& what) {
  fail("plugin '{}' returned invalid data: {}", file, what);
}

bool valid_task_name(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  for (const char* c = name; *c; ++c)
    if (static_cast<unsigned char>(*c) <= ' ' || *c == 0x7F) return false;
  return true;
}

using Instance = std::unique_ptr<void, void (*)(void*)>;

// One created plugin task. The shape is copied once from describe(); draw() calls the plugin's
// sample() and checks every value it wrote before Task::example() sees it.
class PluginTask final : public Task {
 public:
  PluginTask(std::string file, const sb_plugin_task_v1& abi, Instance instance)
      : file_(std::move(file)), abi_(abi), name_(abi.name), instance_(std::move(instance)) {
    sb_plugin_shape_v1 shape{};
    abi_.describe(instance_.get(), &shape);
    const std::string where = "task '" + name_ + "': ";
    if (shape.seq_len < 1 || shape.seq_len > kMaxSeqLen)
      invalid(file_, fmt::format("{}seq_len {} is outside [1, {}]", where, shape.seq_len, kMaxSeqLen));
    if (shape.vocab_size < 1 || shape.vocab_size > INT32_MAX)
      invalid(file_, fmt::format("{}vocab_size {} is outside [1, {}]", where, shape.vocab_size, INT32_MAX));
    if (shape.token_names == nullptr) invalid(file_, where + "token_names is NULL");
    if (shape.n_splits < 1 || shape.splits == nullptr) invalid(file_, where + "no splits");
    seq_len_ = shape.seq_len;
    for (int64_t id = 0; id < shape.vocab_size; ++id) {
      if (shape.token_names[id] == nullptr) invalid(file_, fmt::format("{}token_names[{}] is NULL", where, id));
      vocab_.emplace_back(shape.token_names[id]);
    }
    std::set<std::string> seen;
    for (uint32_t i = 0; i < shape.n_splits; ++i) {
      const sb_plugin_split_v1& s = shape.splits[i];
      if (s.name == nullptr || *s.name == '\0') invalid(file_, fmt::format("{}split {} has no name", where, i));
      if (!seen.insert(s.name).second) invalid(file_, fmt::format("{}split '{}' appears twice", where, s.name));
      splits_.push_back({s.name, s.is_eval != 0, s.help ? s.help : ""});
    }
    if (shape.details) details_ = shape.details;
  }

  std::string name() const override { return name_; }
  int64_t seq_len() const override { return seq_len_; }
  std::vector<std::string> vocab() const override { return vocab_; }
  std::vector<SplitSpec> splits() const override { return splits_; }
  std::string details() const override { return details_; }

  // Sampling from a caller's Rng: the plugin's streams are addressed by (key, index), so take
  // both from rng. Task::example() never comes here; it calls draw() directly.
  void sample(int split, Rng& rng, ExampleView out) const override {
    const uint64_t key = rng.u64();
    draw(split, key, rng.u64(), 0, out);
  }

  void draw(int split, uint64_t key, uint64_t index, uint32_t attempt, ExampleView out) const override {
    if (split < 0 || split >= static_cast<int>(splits_.size()))
      fail("split index {} out of range for task '{}' (plugin '{}')", split, name_, file_);
    // Sentinels no valid output contains, so an entry the plugin leaves unwritten is caught.
    std::fill_n(out.input_ids, seq_len_, INT32_MIN);
    std::fill_n(out.labels, seq_len_, INT32_MIN);
    std::fill_n(out.score_mask, seq_len_, uint8_t{2});
    char err[SB_PLUGIN_ERROR_SIZE] = {};
    if (abi_.sample(instance_.get(), split, key, index, attempt, out.input_ids, out.labels,
                    out.score_mask, err, sizeof err) != 0)
      fail("plugin '{}': task '{}' split '{}' example {}: {}", file_, name_, splits_[split].name, index,
           plugin_message(err, sizeof err, "sample() failed without a message"));
    check_example(split, index, out);
  }

 private:
  void check_example(int split, uint64_t index, ExampleView out) const {
    const int64_t V = static_cast<int64_t>(vocab_.size());
    auto bad = [&](const std::string& what) {
      invalid(file_, fmt::format("task '{}' split '{}' example {}: {}", name_, splits_[split].name, index,
                                 what));
    };
    for (int64_t t = 0; t < seq_len_; ++t) {
      const int32_t id = out.input_ids[t], label = out.labels[t];
      const uint8_t mask = out.score_mask[t];
      if (id < 0 || id >= V) bad(fmt::format("input_ids[{}] = {} is outside the vocabulary [0, {})", t, id, V));
      if (label != kIgnoreLabel && (label < 0 || label >= V))
        bad(fmt::format("labels[{}] = {} is neither in [0, {}) nor {}", t, label, V, kIgnoreLabel));
      if (mask > 1) bad(fmt::format("score_mask[{}] = {} is not 0 or 1", t, mask));
      if (mask == 1 && label == kIgnoreLabel)
        bad(fmt::format("score_mask[{}] is 1 on an unlabelled position", t));
    }
  }

  std::string file_;
  const sb_plugin_task_v1& abi_;  // in the plugin's static table; the library stays loaded
  std::string name_;
  Instance instance_;
  int64_t seq_len_ = 0;
  std::vector<std::string> vocab_;
  std::vector<SplitSpec> splits_;
  std::string details_;
};

// Checks one task descriptor and turns it into the registry entry that creates PluginTasks.
// `length_param`: the v2 field (may be NULL), or nullptr for a v1 task (then "length" if declared).
TaskInfo task_info(const std::string& file, const sb_plugin_task_v1& abi, uint32_t position, bool v2,
                   const char* length_param) {
  if (!valid_task_name(abi.name))
    invalid(file, fmt::format("task {} has a {} name", position,
                              abi.name ? "blank or whitespace-containing" : "NULL"));
  const std::string name = abi.name;
  auto require = [&](bool present, const char* fn) {
    if (!present) invalid(file, fmt::format("task '{}' has a NULL {}() function", name, fn));
  };
  require(abi.create, "create");
  require(abi.destroy, "destroy");
  require(abi.describe, "describe");
  require(abi.sample, "sample");
  if (abi.n_params > 0 && abi.params == nullptr)
    invalid(file, fmt::format("task '{}' declares {} params but params is NULL", name, abi.n_params));

  TaskInfo info;
  info.name = name;
  info.summary = abi.summary ? abi.summary : "";
  info.origin = file;
  for (uint32_t i = 0; i < abi.n_params; ++i) {
    const sb_plugin_param_v1& p = abi.params[i];
    if (p.name == nullptr || *p.name == '\0')
      invalid(file, fmt::format("task '{}': param {} has no name", name, i));
    const bool repeated = std::any_of(info.params.begin(), info.params.end(),
                                      [&](const ParamSpec& s) { return s.name == p.name; });
    if (repeated) invalid(file, fmt::format("task '{}': param '{}' is declared twice", name, p.name));
    info.params.push_back({p.name, p.default_value ? p.default_value : "", p.help ? p.help : ""});
  }
  const auto declared = [&](const std::string& p) {
    return std::any_of(info.params.begin(), info.params.end(), [&](const ParamSpec& s) { return s.name == p; });
  };
  if (!v2) {
    info.length_param = declared("length") ? "length" : "";
  } else {
    info.length_param = length_param ? length_param : "";
    if (!info.length_param.empty() && !declared(info.length_param))
      invalid(file, fmt::format("task '{}': length_param '{}' is not one of its params", name, info.length_param));
  }
  const sb_plugin_task_v1* task = &abi;
  info.create = [file, task](const Params& params) -> std::unique_ptr<Task> {
    std::vector<std::string> keys, values;
    for (const ParamSpec& spec : params.spec()) {
      if (!params.has_value(spec.name)) continue;
      keys.push_back(spec.name);
      values.push_back(params.str(spec.name));
    }
    std::vector<const char*> key_ptrs, value_ptrs;
    for (size_t i = 0; i < keys.size(); ++i) {
      key_ptrs.push_back(keys[i].c_str());
      value_ptrs.push_back(values[i].c_str());
    }
    char err[SB_PLUGIN_ERROR_SIZE] = {};
    const auto n = static_cast<uint32_t>(keys.size());
    Instance instance(task->create(key_ptrs.data(), value_ptrs.data(), n, err, sizeof err), task->destroy);
    if (!instance)
      fail("plugin '{}': task '{}': {}", file, task->name,
           plugin_message(err, sizeof err, "create() failed without a message"));
    return std::make_unique<PluginTask>(file, *task, std::move(instance));
  };
  return info;
}

// Closes a library on the error paths; release() once its tasks are registered.
struct LibraryHandle {
  void* handle;
  ~LibraryHandle() {
    if (handle) dlclose(handle);
  }
  void release() { handle = nullptr; }
};

template <class Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

void load_plugin(TaskRegistry& registry, const std::string& path) {
  std::error_code ec;
  const std::string file = fs::absolute(path, ec).lexically_normal().string();
  if (ec || !fs::exists(file, ec)) fail("plugin file '{}' does not exist", path);
  if (!fs::is_regular_file(file, ec)) fail("plugin file '{}' is not a regular file", file);

  dlerror();
  LibraryHandle lib{dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)};
  if (!lib.handle) {
    const char* why = dlerror();
    fail("cannot load plugin '{}': {}", file, why ? why : "dlopen failed");
  }
  const auto abi_version = symbol<sb_plugin_abi_version_fn>(lib.handle, SB_PLUGIN_ABI_VERSION_SYMBOL);
  if (!abi_version)
    fail("'{}' is not a statebench plugin: missing symbol {}", file, SB_PLUGIN_ABI_VERSION_SYMBOL);
  const uint32_t version = abi_version();
  if (version != SB_PLUGIN_ABI_V1 && version != SB_PLUGIN_ABI_V2)
    fail("plugin '{}' was built for plugin ABI v{}; this statebench supports v{} and v{}", file, version,
         SB_PLUGIN_ABI_V1, SB_PLUGIN_ABI_V2);
  const bool v2 = version == SB_PLUGIN_ABI_V2;
  const char* entry_name = v2 ? SB_PLUGIN_ENTRY_V2_SYMBOL : SB_PLUGIN_ENTRY_V1_SYMBOL;
  void* entry = dlsym(lib.handle, entry_name);
  if (!entry) fail("plugin '{}' reports ABI v{} but lacks its entry symbol {}", file, version, entry_name);
  // The task table, as (v1 task, v2 length_param) pairs: a v2 task begins with its v1 part.
  uint32_t n_tasks = 0;
  std::vector<std::pair<const sb_plugin_task_v1*, const char*>> tasks;
  if (v2) {
    const sb_plugin_v2* table = reinterpret_cast<sb_plugin_entry_v2_fn>(entry)();
    if (table == nullptr) invalid(file, fmt::format("{}() returned NULL", entry_name));
    if (table->n_tasks == 0 || table->tasks == nullptr) invalid(file, "the plugin declares no tasks");
    n_tasks = table->n_tasks;
    for (uint32_t i = 0; i < n_tasks; ++i) tasks.emplace_back(&table->tasks[i].task, table->tasks[i].length_param);
  } else {
    const sb_plugin_v1* table = reinterpret_cast<sb_plugin_entry_v1_fn>(entry)();
    if (table == nullptr) invalid(file, fmt::format("{}() returned NULL", entry_name));
    if (table->n_tasks == 0 || table->tasks == nullptr) invalid(file, "the plugin declares no tasks");
    n_tasks = table->n_tasks;
    for (uint32_t i = 0; i < n_tasks; ++i) tasks.emplace_back(&table->tasks[i], nullptr);
  }

  // Validate every task before registering any, so a bad file adds nothing.
  std::vector<TaskInfo> infos;
  std::set<std::string> names;
  for (uint32_t i = 0; i < n_tasks; ++i) {
    TaskInfo info = task_info(file, *tasks[i].first, i, v2, tasks[i].second);
    if (!names.insert(info.name).second) invalid(file, fmt::format("task '{}' is declared twice", info.name));
    if (registry.contains(info.name)) {
      const std::string& origin = registry.get(info.name).origin;
      if (origin == file) return;  // this file is already loaded into this registry
      fail("plugin '{}': task '{}' is already registered (from {})", file, info.name, origin);
    }
    infos.push_back(std::move(info));
  }
  for (auto& info : infos) registry.add(std::move(info));
  lib.release();  // kept for the process lifetime: tasks point into the library
}

void load_plugins_from_env(TaskRegistry& registry) {
  const char* env = std::getenv(kPluginPathEnv);
  if (env == nullptr) return;
  const std::string dirs = env;
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    start = end + 1;
    if (dir.empty()) continue;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) fail("{} names '{}', which is not a directory", kPluginPathEnv, dir);
    std::vector<std::string> files;
    for (fs::directory_iterator it(dir, ec), last; !ec && it != last; it.increment(ec)) {
      std::error_code broken_link;  // a dangling *.so link is skipped, not an error
      if (it->path().extension() == ".so" && fs::is_regular_file(it->path(), broken_link))
        files.push_back(it->path().string());
    }
    if (ec) fail("cannot list plugin directory '{}' (from {}): {}", dir, kPluginPathEnv, ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) load_plugin(registry, file);
  }
}

std::vector<std::string> loaded_plugin_files(const TaskRegistry& registry) {
  std::set<std::string> files;
  for (const TaskInfo* info : registry.list())
    if (info->origin != "built-in") files.insert(info->origin);
  return {files.begin(), files.end()};
}

}  // namespace sb
