// cmd_tasks.cpp: `statebench tasks` (the table of registered tasks) and `statebench tasks show
// NAME [--param k=v]...` (parameters, T, vocabulary, splits and details of one configuration),
// plus the helpers every task-taking subcommand shares (--param, make_task, format_table).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/cli.hpp"
#include "core/error.hpp"
#include "core/params.hpp"

namespace sb::cli {

namespace {

constexpr size_t kVocabShowAll = 32;   // longer vocabularies show their ends only
constexpr size_t kVocabShowEnds = 8;   // ... this many tokens at each end
constexpr size_t kWrapColumns = 100;

// A token name as printed: quoted when it is empty or has spaces or control characters.
std::string show_token(const std::string& token) {
  const bool plain = !token.empty() && std::none_of(token.begin(), token.end(), [](unsigned char c) {
    return c <= ' ' || c == 0x7F;
  });
  if (plain) return token;
  std::string out = "\"";
  for (unsigned char c : token) {
    if (c == '"' || c == '\\') out += fmt::format("\\{}", static_cast<char>(c));
    else if (c < ' ' || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else out.push_back(static_cast<char>(c));
  }
  return out + "\"";
}

// "id=token" entries wrapped into indented lines.
std::string format_vocab(const std::vector<std::string>& vocab) {
  std::vector<std::string> items;
  const size_t V = vocab.size();
  const bool abbreviate = V > kVocabShowAll;
  for (size_t i = 0; i < V; ++i) {
    if (abbreviate && i == kVocabShowEnds) {
      items.push_back(fmt::format("... ({} more) ...", V - 2 * kVocabShowEnds));
      i = V - kVocabShowEnds - 1;
      continue;
    }
    items.push_back(fmt::format("{}={}", i, show_token(vocab[i])));
  }
  std::string out, line = "  ";
  for (const auto& item : items) {
    if (line.size() > 2 && line.size() + 2 + item.size() > kWrapColumns) {
      out += line + "\n";
      line = "  ";
    }
    line += (line.size() > 2 ? "  " : "") + item;
  }
  return out + line + "\n";
}

std::string indent_lines(const std::string& text, const std::string& indent) {
  std::string out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    out += indent + text.substr(begin, end - begin) + "\n";
    begin = end + 1;
  }
  return out;
}

void print_task_list(const Context& ctx) {
  std::vector<std::vector<std::string>> rows{{"name", "origin", "summary"}};
  for (const TaskInfo* info : ctx.tasks.list()) rows.push_back({info->name, info->origin, info->summary});
  std::fputs(format_table(rows).c_str(), stdout);
}

void print_task_details(const Context& ctx, const std::string& name, const std::vector<std::string>& param_args) {
  const TaskInfo& info = ctx.tasks.get(name);
  const Params params(fmt::format("task '{}'", name), info.params, Params::parse_assignments(param_args));
  // With no --param, a task that needs one (automaton's file) still shows its parameters.
  std::unique_ptr<Task> task;
  std::string not_created;
  try {
    task = info.create(params);
  } catch (const Error& e) {
    if (!param_args.empty()) throw;
    not_created = e.what();
  }

  std::string out = fmt::format("{}: {}\norigin: {}\n\nparameters:\n", info.name, info.summary, info.origin);
  if (info.params.empty()) {
    out += "  (none)\n";
  } else {
    std::vector<std::vector<std::string>> rows{{"name", "default", "value", "help"}};
    for (const ParamSpec& spec : info.params) {
      const std::string value = params.has_value(spec.name) ? params.str(spec.name) : "-";
      rows.push_back({spec.name, spec.default_value.empty() ? "-" : spec.default_value,
                      value + (params.given(spec.name) ? " *" : ""), spec.help});
    }
    out += format_table(rows, "  ");
    out += "  (* = set by --param; - = no value: the task derives it)\n";
  }
  out += info.length_param.empty()
             ? "length: fixed (no length parameter: no evaluation at other lengths)\n"
             : fmt::format("length parameter: {} (task.eval[].length and `eval --length` set it)\n", info.length_param);

  if (!task) {
    out += fmt::format("\n(not instantiated at its defaults: {})\n", not_created);
    std::fputs(out.c_str(), stdout);
    return;
  }
  const auto vocab = task->vocab();
  out += fmt::format("\nsequence length T: {}\nvocabulary: V={}\n", task->seq_len(), vocab.size());
  out += format_vocab(vocab);

  out += "\nsplits:\n";
  std::vector<std::vector<std::string>> rows{{"name", "kind", "help"}};
  for (const SplitSpec& split : task->splits()) rows.push_back({split.name, split.eval ? "eval" : "train", split.help});
  out += format_table(rows, "  ");

  const std::string details = task->details();
  if (!details.empty()) out += "\ndetails:\n" + indent_lines(details, "  ");
  std::fputs(out.c_str(), stdout);
}

}  // namespace

std::string format_table(const std::vector<std::vector<std::string>>& rows, const std::string& indent) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line.append(width[c] - row[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

CLI::Option* add_param_option(CLI::App& cmd, std::vector<std::string>& params) {
  return cmd.add_option("--param,-p", params, "a task parameter, KEY=VALUE (repeatable; see `statebench tasks show NAME`)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
}

std::unique_ptr<Task> make_task(const Context& ctx, const std::string& name, const std::vector<std::string>& params) {
  return ctx.tasks.create(name, Params::parse_assignments(params));
}

void add_tasks_command(CLI::App& app, Context& ctx) {
  struct TasksShowOptions {
    std::string name;
    std::vector<std::string> params;
  };
  auto opt = std::make_shared<TasksShowOptions>();
  CLI::App* tasks = app.add_subcommand("tasks", "list the registered tasks (`tasks show NAME` for one in detail)");
  CLI::App* show = tasks->add_subcommand("show", "parameters, sequence length, vocabulary, splits and details of a task");
  show->add_option("name", opt->name, "task name (see `statebench tasks`)")->required();
  add_param_option(*show, opt->params);

  tasks->callback([&ctx, tasks] {
    if (!tasks->get_subcommands().empty()) return;
    ctx.load_plugins();
    print_task_list(ctx);
  });
  show->callback([&ctx, opt] {
    ctx.load_plugins();
    print_task_details(ctx, opt->name, opt->params);
  });
}

}  // namespace sb::cli
