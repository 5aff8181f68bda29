// The GoogleTest registration of ringkv/conformance/gtest.hpp: one test per property (the CLI's
// property runner: search, bounded shrink, replay tokens) and one per golden case (check_golden).
#include "ringkv/conformance/gtest.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "golden/golden.hpp"
#include "property/properties.hpp"
#include "property_runner.hpp"
#include "support/data_dir.hpp"

#ifndef RINGKV_DEFAULT_GOLDEN_DIR
#define RINGKV_DEFAULT_GOLDEN_DIR ""
#endif

namespace ringkv::conformance {
namespace {

using Factory = std::function<EngineFactory()>;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

class PropertyTest : public ::testing::Test {
 public:
  PropertyTest(Factory f, std::string property, std::string suite, ConformanceTestOptions o)
      : make_(std::move(f)), property_(std::move(property)), suite_(std::move(suite)), o_(std::move(o)) {}
  void TestBody() override {
    const EngineFactory factory = make_();
    cli::PropertyRunOptions po;
    po.cases = o_.cases;
    po.seed = o_.seed;
    po.shrink_time = o_.shrink_time;
    po.filter = "^" + property_ + "$";
    po.replay = env("RINGKV_REPLAY");
    std::error_code ec;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    po.command = "RINGKV_REPLAY={token} " + (self.empty() ? std::string("<this test>") : self) + " --gtest_filter='" +
                 suite_ + "." + property_ + "'";
    const std::vector<cli::PropertyOutcome> out = cli::run_properties(factory, po);
    ASSERT_EQ(out.size(), 1u) << "no property named " << property_;
    const cli::PropertyOutcome& r = out[0];
    if (r.skipped) GTEST_SKIP() << r.report;
    EXPECT_TRUE(r.passed && r.error.empty()) << "property " << property_ << " failed on engine " << factory.name
                                             << "\n" << r.error << r.report;
  }

 private:
  Factory make_;
  std::string property_, suite_;
  ConformanceTestOptions o_;
};

class GoldenTest : public ::testing::Test {
 public:
  GoldenTest(Factory f, std::string dir, golden::ManifestEntry e) : make_(std::move(f)), dir_(std::move(dir)), e_(std::move(e)) {}
  void TestBody() override {
    golden::GoldenCase g;
    try {
      g = golden::load_manifest_case(dir_, e_);
    } catch (const golden::GoldenInputError& ex) {  // the golden file's fault, never the engine's
      FAIL() << "unusable golden case (no verdict on the engine): " << ex.what();
    }
    const EngineFactory factory = make_();
    const golden::GoldenOutcome o = golden::check_golden(factory, g, {});
    if (o.skipped) GTEST_SKIP() << "not applicable: " << o.skip_reason;
    EXPECT_TRUE(o.passed) << "golden case " << e_.name << " failed on engine " << factory.name << "\n  case: " << e_.id
                          << "\n  classes: " << ::testing::PrintToString(e_.classes) << "\n  " << o.failure
                          << "\n  worst error " << o.worst_ratio << " of the bound";
  }

 private:
  Factory make_;
  std::string dir_;
  golden::ManifestEntry e_;
};

}  // namespace

int register_conformance_tests(const std::string& suite, Factory make_factory, ConformanceTestOptions o) {
  if (const std::string v = env("RINGKV_CASES"); !v.empty()) o.cases = std::stoi(v);
  if (const std::string v = env("RINGKV_SHRINK_TIME"); !v.empty()) o.shrink_time = std::stod(v);
  if (const std::string v = env("RINGKV_SEED"); !v.empty()) o.seed = std::stoull(v);
  // The data the build named (an installed tree's share/ringkv) is where data_dir() looks first, for
  // the golden set and for the named profiles alike, unless the user set $RINGKV_DATA_DIR.
  if (!o.data_dir.empty() && env("RINGKV_DATA_DIR").empty()) ::setenv("RINGKV_DATA_DIR", o.data_dir.c_str(), 0);
  if (o.golden_dir.empty()) o.golden_dir = env("RINGKV_GOLDEN_DIR");
  if (o.golden_dir.empty()) o.golden_dir = data_dir("golden", RINGKV_DEFAULT_GOLDEN_DIR);
  int n = 0;
  const std::string property_suite = suite + "/Property", golden_suite = suite + "/Golden";
  if (o.properties) {
    for (const PropertyInfo& p : all_properties()) {
      const std::string name = p.name;
      ::testing::RegisterTest(property_suite.c_str(), p.name, nullptr, nullptr, __FILE__, __LINE__,
                              [=]() -> ::testing::Test* { return new PropertyTest(make_factory, name, property_suite, o); });
      ++n;
    }
  }
  if (o.golden) {
    // The manifest is read here, so that each case is a test; a missing or malformed set is a
    // registration error with its reason, as one failing test.
    std::vector<golden::ManifestEntry> entries;
    std::string why;
    try {
      entries = golden::read_manifest(o.golden_dir);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!why.empty()) {
      ::testing::RegisterTest(golden_suite.c_str(), "GoldenSetReadable", nullptr, nullptr, __FILE__, __LINE__,
                              [why]() -> ::testing::Test* {
                                struct Unreadable : ::testing::Test {
                                  std::string why;
                                  void TestBody() override { FAIL() << "the golden set cannot be read: " << why; }
                                };
                                auto* t = new Unreadable;
                                t->why = why;
                                return t;
                              });
      return n + 1;
    }
    for (const golden::ManifestEntry& e : entries) {
      const std::string dir = o.golden_dir;
      ::testing::RegisterTest(golden_suite.c_str(), e.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                              [=]() -> ::testing::Test* { return new GoldenTest(make_factory, dir, e); });
      ++n;
    }
  }
  return n;
}

}  // namespace ringkv::conformance
