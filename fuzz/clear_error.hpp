// The fuzz targets' verdict on one input: a reader that rejects it with a ringkv::Error carrying a
// message is working as designed (docs/reliability.md, "Fuzzing"). Anything else is a finding: a crash,
// a sanitizer report, a hang or a leak is caught by libFuzzer and the sanitizers; an exception of
// another type, or one without a message, is caught here and aborts, printing its type and text.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <typeinfo>

#include "ringkv/error.hpp"

namespace ringkv::fuzz {

[[noreturn]] inline void finding(const char* what, const char* type, const char* message) {
  std::fprintf(stderr, "fuzz finding: %s threw %s: \"%s\" (only a ringkv::Error with a message is a clear rejection)\n",
               what, type, message);
  std::abort();
}

/// Runs read(); returns true if it accepted the input, false if it rejected it with a clear ringkv::Error.
template <typename F>
bool accepts(const char* what, F&& read) {
  try {
    read();
    return true;
  } catch (const Error& e) {
    if (e.what()[0] == '\0') finding(what, typeid(e).name(), "");
    return false;
  } catch (const std::exception& e) {
    finding(what, typeid(e).name(), e.what());
  }
}

}  // namespace ringkv::fuzz
