// What a reader accepted must survive its writer: write(value) reads back, and writes the same again.
#pragma once

#include <string>

#include "clear_error.hpp"

namespace ringkv::fuzz {

template <typename T, typename Read, typename Write>
void expect_round_trip(const char* what, const T& value, Read read, Write write) {
  const auto written = write(value);
  T again;
  if (!accepts(what, [&] { again = read(written); }) || write(again) != written) {
    finding(what, "a value", "that does not read back the same after writing");
  }
}

}  // namespace ringkv::fuzz
