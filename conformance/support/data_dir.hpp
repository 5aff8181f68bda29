// ringkv conformance: where ringkv's data folders (the golden set, the named precision profiles) are,
// for a build tree and for an installed tree alike (issue 12).
#pragma once

#include <string>

namespace ringkv::conformance {

/// The folder `name` ("golden", "profiles") of ringkv's data, the first that exists of:
///  1. $RINGKV_DATA_DIR/<name> (set it for a program outside an installed tree's bin/);
///  2. <folder of the running executable>/../share/ringkv/<name>: an installed tree (cmake --install,
///     the .deb), wherever its prefix was moved;
///  3. `build_tree_dir`, the source tree's folder the build was configured with.
/// If none exists, `build_tree_dir`, so that the error that follows names the path a developer expects.
std::string data_dir(const std::string& name, const std::string& build_tree_dir);

/// The folder of the running executable (from /proc/self/exe), or "" where it cannot be read.
std::string executable_dir();

}  // namespace ringkv::conformance
