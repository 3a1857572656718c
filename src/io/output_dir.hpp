// output_dir.hpp: output directories (a run's --out, a sweep's --out) checked before anything is
// written and created with one-line errors naming the path, never a filesystem exception.
#pragma once
#include <string>

namespace sb {

// sb::Error "WHAT 'DIR': why" unless DIR is a writable directory or could be created as one (its
// nearest existing ancestor is a writable directory). Writes nothing.
void check_output_dir(const std::string& dir, const std::string& what);

// Creates DIR and its parents (nothing when it exists); sb::Error "WHAT 'DIR': why" on failure.
void create_output_dir(const std::string& dir, const std::string& what);

}  // namespace sb
