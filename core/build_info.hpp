// build_info.hpp: the git commit this binary was built from, for provenance (results, benchmarks,
// --version). Written at build time by cmake/build_info.cmake (so it follows new commits without a
// re-configure); "-dirty" marks a build with uncommitted changes to tracked files.
#pragma once

namespace sb {
const char* build_commit();
}
