// app.cpp: the statebench command line. Wires the subcommands together and turns every
// sb::Error or bad command line into a one-line message and exit code 2 (main.cpp calls it).
#include <cstdio>
#include <exception>
#include <new>

#include "cli/app.hpp"
#include "cli/cli.hpp"
#include "core/build_info.hpp"
#include "core/error.hpp"
#include "tasks/plugin_loader.hpp"

namespace sb::cli {

void Context::load_plugins() {
  if (plugins_loaded) return;
  plugins_loaded = true;
  load_plugins_from_env(tasks);
  for (const auto& file : plugin_files) load_plugin(tasks, file);
}

int run_statebench(int argc, char** argv) {
  Context ctx;
  CLI::App app{"statebench: state tracking in small transformers (tasks, training, sweeps, tables)"};
#ifdef STATEBENCH_HAVE_CUDA
  constexpr const char* backends = "cpu+cuda";
#else
  constexpr const char* backends = "cpu";
#endif
  app.set_version_flag("--version",
                       std::string("statebench " STATEBENCH_VERSION " (") + sb::build_commit() + ") " + backends);
  app.add_option("--plugin", ctx.plugin_files, "load task plugins from these shared libraries")
      ->check(CLI::ExistingFile)
      ->type_name("PATH.so");
  app.require_subcommand(1);
  try {
    register_builtin_tasks(ctx.tasks);
    add_tasks_command(app, ctx);
    add_generate_command(app, ctx);
    add_train_command(app, ctx);
    add_bench_command(app, ctx);
    add_sweep_command(app, ctx);
    add_table_command(app, ctx);
    add_eval_command(app, ctx);
    add_export_command(app, ctx);
    for (int i = 0; i < argc; ++i) ctx.command_line += (i ? " " : "") + std::string(argv[i]);
    app.parse(argc, argv);
  } catch (const ExitCode& e) {
    return e.code;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "statebench: error: %s\n", e.what());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "statebench: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {  // train checks its estimate first; this is the backstop
    std::fprintf(stderr, "statebench: error: out of memory (the run is larger than this machine can hold)\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "statebench: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}

}  // namespace sb::cli
