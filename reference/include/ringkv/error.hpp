// ringkv: error types. Every rejection of bad input throws one of these, with a
// message that names the field, the value it had and the range it must be in.
#pragma once

#include <stdexcept>
#include <string>

namespace ringkv {

/// Base class of every error ringkv throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A configuration field is out of its allowed range.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// A step (batch of chunks) or reset request is invalid for the engine's config.
class StepError : public Error {
 public:
  using Error::Error;
};

}  // namespace ringkv
