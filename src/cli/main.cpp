// main.cpp: the statebench executable; the command line lives in sb_cli (cli/app.cpp), so this file
// includes no CLI11 and compiles in no time.
#include "cli/app.hpp"

int main(int argc, char** argv) { return sb::cli::run_statebench(argc, argv); }
