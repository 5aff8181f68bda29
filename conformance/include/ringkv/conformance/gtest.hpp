// ringkv conformance in a C++ engine's own test suite (issue 12): every property and every golden
// case as a GoogleTest test, and so, through gtest_discover_tests, as a ctest test of the user's
// project, with ringkv's search, bounded shrink and reproduce lines, and GoogleTest's JUnit output.
//
//   // my_engine_conformance.cpp
//   #include <ringkv/conformance/gtest.hpp>
//   RINGKV_CONFORMANCE_TESTS(MyEngine, my_engine_factory())   // an expression giving a ringkv::EngineFactory
//
//   # CMakeLists.txt
//   find_package(ringkv CONFIG REQUIRED COMPONENTS conformance)
//   add_executable(my_engine_conformance my_engine_conformance.cpp)
//   target_link_libraries(my_engine_conformance PRIVATE my_engine)
//   ringkv_add_conformance_tests(my_engine_conformance)   # links ringkv, registers the ctest tests
//
// The tests are MyEngine/Property.<name> (13, e.g. MyEngine/Property.OracleEquality) and
// MyEngine/Golden.<case> (one per case of the golden set). A property or case outside the engine's
// declared capabilities is skipped with the reason. A failing property prints the first failing
// case, the shrunk case and the line that replays it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ringkv/engine.hpp"

namespace ringkv::conformance {

struct ConformanceTestOptions {
  int cases = 100;            ///< cases per property (RapidCheck's default); $RINGKV_CASES overrides
  double shrink_time = 60;    ///< shrink budget per failing property, seconds; $RINGKV_SHRINK_TIME overrides
  uint64_t seed = 1;          ///< the search's seed; $RINGKV_SEED overrides
  std::string golden_dir;     ///< "": $RINGKV_GOLDEN_DIR, else <data_dir>/golden
  /// ringkv's data (golden/, profiles/): "" = $RINGKV_DATA_DIR or found as support/data_dir.hpp says;
  /// ringkv_add_conformance_tests() sets it to the installed tree's share/ringkv.
  std::string data_dir;
  bool properties = true, golden = true;
};

namespace detail {
/// The options ringkv_add_conformance_tests() compiled into the test binary.
inline ConformanceTestOptions options_from_build() {
  ConformanceTestOptions o;
#ifdef RINGKV_CONFORMANCE_DATA_DIR
  o.data_dir = RINGKV_CONFORMANCE_DATA_DIR;
#endif
#ifdef RINGKV_CONFORMANCE_CASES
  o.cases = RINGKV_CONFORMANCE_CASES;
#endif
#ifdef RINGKV_CONFORMANCE_SHRINK_TIME
  o.shrink_time = RINGKV_CONFORMANCE_SHRINK_TIME;
#endif
  return o;
}
}  // namespace detail

/// Registers the tests (call before RUN_ALL_TESTS; the macro below does it at static initialisation).
/// `make_factory` runs when a test runs, not at registration. Returns the number of tests registered.
int register_conformance_tests(const std::string& suite, std::function<EngineFactory()> make_factory,
                               ConformanceTestOptions options = {});

}  // namespace ringkv::conformance

#define RINGKV_CONFORMANCE_DETAIL_CAT2(a, b) a##b
#define RINGKV_CONFORMANCE_DETAIL_CAT(a, b) RINGKV_CONFORMANCE_DETAIL_CAT2(a, b)
/// RINGKV_CONFORMANCE_TESTS(Suite, factory expression [, ConformanceTestOptions]): registers Suite's tests.
#define RINGKV_CONFORMANCE_TESTS(Suite, ...)                                                               \
  [[maybe_unused]] static const int RINGKV_CONFORMANCE_DETAIL_CAT(ringkv_conformance_registered_, Suite) = \
      ::ringkv::conformance::register_conformance_tests(#Suite, [] { return __VA_ARGS__; },                  \
                                                        ::ringkv::conformance::detail::options_from_build())
