// app.hpp: the statebench command line as a function, so that main.cpp (the executable) needs no
// CLI11 and the command line can live in sb_cli.
#pragma once

namespace sb::cli {

// Parses argv and runs the subcommand; returns the process exit code (2 for bad input).
int run_statebench(int argc, char** argv);

}  // namespace sb::cli
