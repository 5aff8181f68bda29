// ringkv golden: a minimal, strict safetensors reader and writer.
//
// File layout (https://huggingface.co/docs/safetensors, "Format"):
//   8 bytes   N, little-endian uint64: the header length
//   N bytes   a JSON object {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}
//   ...       the byte buffer; offsets are relative to its start
//
// The writer is deterministic: tensors in name order with contiguous offsets,
// the JSON with sorted keys and no whitespace, padded with spaces so that the
// buffer starts at a multiple of 8. The same StFile always gives the same bytes.
//
// The reader validates everything and throws ringkv::Error naming the file,
// the tensor and the problem; it never reads outside the bytes it was given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "ringkv/error.hpp"

namespace ringkv::golden {

/// The dtypes this reader and writer support (a subset of safetensors').
enum class StDType { F64, F32, I64, I32, I8, U8 };

const char* to_string(StDType dtype);
/// Bytes per element: 8, 4, 8, 4, 1, 1.
size_t element_size(StDType dtype);

template <typename T>
constexpr StDType st_dtype_of() {
  if constexpr (std::is_same_v<T, double>) return StDType::F64;
  else if constexpr (std::is_same_v<T, float>) return StDType::F32;
  else if constexpr (std::is_same_v<T, int64_t>) return StDType::I64;
  else if constexpr (std::is_same_v<T, int32_t>) return StDType::I32;
  else if constexpr (std::is_same_v<T, int8_t>) return StDType::I8;
  else {
    static_assert(std::is_same_v<T, uint8_t>, "unsupported element type");
    return StDType::U8;
  }
}

/// Shape as text, e.g. "[2, 3]".
std::string shape_string(const std::vector<int64_t>& shape);
/// Elements of a shape (1 for a scalar shape []).
int64_t shape_elements(const std::vector<int64_t>& shape);

struct StTensor {
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  ///< little-endian bytes: element_size(dtype) * shape_elements(shape)
};

/// A tensor from values (little-endian host assumed, checked at compile time in safetensors.cpp).
template <typename T>
StTensor make_tensor(std::vector<int64_t> shape, const std::vector<T>& values) {
  if (static_cast<int64_t>(values.size()) != shape_elements(shape)) {
    throw Error("make_tensor: " + std::to_string(values.size()) + " values for shape " + shape_string(shape));
  }
  StTensor t;
  t.dtype = st_dtype_of<T>();
  t.shape = std::move(shape);
  t.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

/// One safetensors file in memory.
struct StFile {
  std::string source = "<memory>";  ///< the file name, for error messages
  std::map<std::string, std::string> metadata;
  std::map<std::string, StTensor> tensors;

  bool has(const std::string& name) const { return tensors.count(name) != 0; }
  /// The tensor, or throws "SOURCE: tensor 'NAME' is missing".
  const StTensor& get(const std::string& name) const;
  /// The tensor, checked to have this dtype and shape (throws naming what differs).
  const StTensor& get(const std::string& name, StDType dtype, const std::vector<int64_t>& shape) const;
  /// The values of a tensor checked to have T's dtype and this shape.
  template <typename T>
  std::vector<T> values(const std::string& name, const std::vector<int64_t>& shape) const {
    const StTensor& t = get(name, st_dtype_of<T>(), shape);
    std::vector<T> out(t.data.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), t.data.data(), t.data.size());
    return out;
  }
  /// A metadata value, or throws "SOURCE: __metadata__ has no key 'KEY'".
  const std::string& meta(const std::string& key) const;
};

/// The file's bytes (deterministic). Throws Error for a tensor whose data does not match its shape.
std::vector<uint8_t> serialize_safetensors(const StFile& file);
/// Parses and validates bytes; `source` names them in error messages.
StFile parse_safetensors(const uint8_t* data, size_t size, const std::string& source);
inline StFile parse_safetensors(const std::vector<uint8_t>& bytes, const std::string& source) {
  return parse_safetensors(bytes.data(), bytes.size(), source);
}

void write_safetensors(const std::string& path, const StFile& file);
StFile read_safetensors(const std::string& path);

/// Whole-file helpers (throw Error naming the path on failure).
std::vector<uint8_t> read_file_bytes(const std::string& path);
void write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace ringkv::golden
