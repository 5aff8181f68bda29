#include "golden/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

namespace ringkv::golden {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader and writer copy bytes as they are");

using nlohmann::json;

// The largest header this reader accepts (the safetensors library uses the same limit).
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
// The largest tensor: far above anything a golden case holds, and no overflow in size arithmetic.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 48;

constexpr StDType kAllDTypes[] = {StDType::F64, StDType::F32, StDType::I64, StDType::I32, StDType::I8, StDType::U8};

[[noreturn]] void fail(const std::string& source, const std::string& what) { throw Error(source + ": " + what); }

std::string quoted(const std::string& name) { return "tensor '" + name + "'"; }

std::string dtype_list() {
  std::string s;
  for (StDType d : kAllDTypes) s += (s.empty() ? "" : ", ") + std::string(to_string(d));
  return s;
}

// A JSON value that is a non-negative integer, or nothing.
bool as_count(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

}  // namespace

const char* to_string(StDType d) {
  switch (d) {
    case StDType::F64: return "F64";
    case StDType::F32: return "F32";
    case StDType::I64: return "I64";
    case StDType::I32: return "I32";
    case StDType::I8: return "I8";
    case StDType::U8: return "U8";
  }
  return "?";
}

size_t element_size(StDType d) {
  switch (d) {
    case StDType::F64: case StDType::I64: return 8;
    case StDType::F32: case StDType::I32: return 4;
    case StDType::I8: case StDType::U8: return 1;
  }
  return 1;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t shape_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("shape " + shape_string(shape) + ": negative dimension");
    if (d != 0 && n > kMaxTensorBytes / d) throw Error("shape " + shape_string(shape) + ": too many elements");
    n *= d;
  }
  return n;
}

const StTensor& StFile::get(const std::string& name) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) fail(source, quoted(name) + " is missing");
  return it->second;
}

const StTensor& StFile::get(const std::string& name, StDType dtype, const std::vector<int64_t>& shape) const {
  const StTensor& t = get(name);
  if (t.dtype != dtype) {
    fail(source, quoted(name) + " has dtype " + to_string(t.dtype) + ", expected " + to_string(dtype));
  }
  if (t.shape != shape) {
    fail(source, quoted(name) + " has shape " + shape_string(t.shape) + ", expected " + shape_string(shape));
  }
  return t;
}

const std::string& StFile::meta(const std::string& key) const {
  const auto it = metadata.find(key);
  if (it == metadata.end()) fail(source, "__metadata__ has no key '" + key + "'");
  return it->second;
}

std::vector<uint8_t> serialize_safetensors(const StFile& file) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {  // std::map: name order
    if (name.empty() || name == "__metadata__") fail(file.source, "invalid tensor name '" + name + "'");
    const int64_t n = shape_elements(t.shape);
    if (t.data.size() != static_cast<size_t>(n) * element_size(t.dtype)) {
      fail(file.source, quoted(name) + ": " + std::to_string(t.data.size()) + " data bytes for " +
                            to_string(t.dtype) + " " + shape_string(t.shape));
    }
    const uint64_t end = offset + t.data.size();
    header[name] = json{{"dtype", to_string(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!file.metadata.empty()) {
    json meta = json::object();
    for (const auto& [k, v] : file.metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  std::string text = header.dump();  // sorted keys (std::map), no whitespace
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> out(8 + text.size() + offset);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  uint8_t* p = out.data() + 8 + text.size();
  for (const auto& [name, t] : file.tensors) {
    if (!t.data.empty()) std::memcpy(p, t.data.data(), t.data.size());
    p += t.data.size();
  }
  return out;
}

StFile parse_safetensors(const uint8_t* data, size_t size, const std::string& source) {
  StFile file;
  file.source = source;
  if (size < 8) {
    fail(source, "file is " + std::to_string(size) + " bytes, too short for the 8-byte header length (truncated?)");
  }
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{data[i]} << (8 * i);
  if (n > size - 8) {
    fail(source, "header length " + std::to_string(n) + " exceeds the " + std::to_string(size - 8) +
                     " bytes after it (truncated file or corrupt header length)");
  }
  if (n > kMaxHeaderBytes) fail(source, "header length " + std::to_string(n) + " exceeds the 100 MiB limit");
  if (n < 2 || data[8] != '{') {
    fail(source, "header does not start with '{': a safetensors header is a JSON object (not a safetensors file?)");
  }
  const char* hbegin = reinterpret_cast<const char*>(data + 8);
  const auto hend = hbegin + n;
  // Outside strings JSON allows only whitespace, and inside them no raw control bytes; the
  // JSON parser would stop quietly at a NUL, so reject control bytes here.
  for (uint64_t i = 0; i < n; ++i) {
    const auto b = data[8 + i];
    if (b < 0x20 && b != '\t' && b != '\n' && b != '\r') {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(b));
      fail(source, "header is not valid JSON: control byte " + std::string(hex) + " at header offset " + std::to_string(i));
    }
  }

  // Parse, rejecting duplicate keys (a JSON parser would silently keep one of them).
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const json::parser_callback_t track = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && parsed.is_string() && !open_objects.empty()) {
      if (!open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  json header;
  try {
    header = json::parse(hbegin, hend, track);
  } catch (const json::exception& e) {
    fail(source, std::string("header is not valid JSON: ") + e.what());
  }
  if (!duplicate.empty()) fail(source, "header has the key '" + duplicate + "' twice");
  if (!header.is_object()) fail(source, "header is not a JSON object");

  const uint64_t buffer = size - 8 - n;
  const uint8_t* base = data + 8 + n;
  struct Range {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Range> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(source, "__metadata__ is not a JSON object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(source, "__metadata__ '" + k + "' is not a string (safetensors metadata values are strings)");
        file.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string what = quoted(name);
    if (name.empty()) fail(source, "a tensor has an empty name");
    if (!entry.is_object()) fail(source, what + ": entry is not a JSON object");
    for (const auto& [k, v] : entry.items()) {
      (void)v;
      if (k != "dtype" && k != "shape" && k != "data_offsets") fail(source, what + ": unknown field '" + k + "'");
    }
    for (const char* k : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(k)) fail(source, what + ": missing field '" + k + "'");
    }
    StTensor t;
    const json& dt = entry["dtype"];
    if (!dt.is_string()) fail(source, what + ": dtype is not a string");
    bool known = false;
    for (StDType d : kAllDTypes) {
      if (dt.get<std::string>() == to_string(d)) {
        t.dtype = d;
        known = true;
      }
    }
    if (!known) fail(source, what + ": unknown dtype \"" + dt.get<std::string>() + "\" (this reader knows " + dtype_list() + ")");
    const json& sh = entry["shape"];
    if (!sh.is_array()) fail(source, what + ": shape is not an array");
    int64_t elements = 1;
    for (const json& d : sh) {
      uint64_t v = 0;
      if (!as_count(d, &v)) fail(source, what + ": shape " + sh.dump() + " has an entry that is not a non-negative integer");
      if (v > static_cast<uint64_t>(kMaxTensorBytes) ||
          (v != 0 && elements > kMaxTensorBytes / static_cast<int64_t>(v))) {
        fail(source, what + ": shape " + sh.dump() + " is too large");
      }
      t.shape.push_back(static_cast<int64_t>(v));
      elements *= static_cast<int64_t>(v);
    }
    const json& off = entry["data_offsets"];
    uint64_t b = 0, e = 0;
    if (!off.is_array() || off.size() != 2 || !as_count(off[0], &b) || !as_count(off[1], &e)) {
      fail(source, what + ": data_offsets " + off.dump() + " must be [begin, end], non-negative integers");
    }
    if (e < b) fail(source, what + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) + "]: end before begin (expected [begin, end] with begin <= end)");
    if (e > buffer) {
      fail(source, what + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) + "] out of range: the buffer has " +
                       std::to_string(buffer) + " bytes (truncated file?)");
    }
    const uint64_t want = static_cast<uint64_t>(elements) * element_size(t.dtype);
    if (e - b != want) {
      fail(source, what + ": shape " + shape_string(t.shape) + " of " + to_string(t.dtype) + " needs " + std::to_string(want) +
                       " bytes, data_offsets [" + std::to_string(b) + ", " + std::to_string(e) + "] give " +
                       std::to_string(e - b));
    }
    t.data.assign(base + b, base + e);
    ranges.push_back({b, e, name});
    file.tensors.emplace(name, std::move(t));
  }
  // The buffer must be covered exactly: no overlap, no hole (safetensors spec).
  std::sort(ranges.begin(), ranges.end(), [](const Range& x, const Range& y) {
    return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
  });
  uint64_t at = 0;
  const Range* prev = nullptr;
  for (const Range& r : ranges) {
    if (r.begin < at) {
      fail(source, quoted(r.name) + " [" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ") overlaps " +
                       quoted(prev->name) + " [" + std::to_string(prev->begin) + ", " + std::to_string(prev->end) +
                       ") (each byte of the buffer belongs to one tensor)");
    }
    if (r.begin > at) {
      fail(source, "bytes [" + std::to_string(at) + ", " + std::to_string(r.begin) +
                       ") of the buffer belong to no tensor (a hole before " + quoted(r.name) + ")");
    }
    at = r.end;
    prev = &r;
  }
  if (at != buffer) {
    fail(source, "the last " + std::to_string(buffer - at) + " bytes of the buffer belong to no tensor (trailing data)");
  }
  return file;
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open for reading");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw Error(path + ": cannot determine the file size");
  in.seekg(0, std::ios::beg);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0) in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (!in) throw Error(path + ": read failed");
  return bytes;
}

void write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot open for writing");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw Error(path + ": write failed");
}

void write_safetensors(const std::string& path, const StFile& file) {
  write_file_bytes(path, serialize_safetensors(file));
}

StFile read_safetensors(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  return parse_safetensors(bytes, path);
}

}  // namespace ringkv::golden
