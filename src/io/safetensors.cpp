#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_set>

namespace tf {
namespace {

using json = nlohmann::json;

// Legit headers nest three levels (root -> entry -> shape); anything far deeper is garbage, and
// refusing it early bounds the parser's work on hostile input.
constexpr int kMaxHeaderDepth = 16;

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A short, printable rendering of a JSON value for messages.
std::string brief(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string supported_dtypes() { return "F64, F32, F16, BF16, I64, I32, I16, U16, I8, U8, BOOL"; }

// Checks the header's JSON syntax, nesting depth and duplicate keys in one streaming pass.
// nlohmann keeps the last duplicate silently, which would let a header describe one tensor twice
// and have us use whichever came last. (A parser callback could do this during the DOM parse,
// but nlohmann's callback parser rescans the parent object at every object end: quadratic in the
// number of tensors.)
class HeaderChecker : public json::json_sax_t {
 public:
  std::string problem;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    objects_.emplace_back();
    return enter();
  }
  bool key(string_t& k) override {
    if (objects_.back().insert(k).second) return true;
    problem = objects_.size() == 1 ? "header names tensor '" + k + "' twice"
                                   : "header has the key '" + k + "' twice in one object";
    return false;
  }
  bool end_object() override {
    objects_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    std::string what = e.what();
    size_t close = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && close != std::string::npos) what = what.substr(close + 2);
    problem = "header is not valid JSON: " + what;
    return false;
  }

 private:
  bool enter() {
    if (++depth_ <= kMaxHeaderDepth) return true;
    problem = "header JSON nests deeper than " + std::to_string(kMaxHeaderDepth) + " levels";
    return false;
  }
  std::vector<std::unordered_set<std::string>> objects_;
  int depth_ = 0;
};

Expected<json> parse_header_json(const char* begin, const char* end) {
  try {
    HeaderChecker checker;
    if (!json::sax_parse(begin, end, &checker)) return make_error(checker.problem);
    return json::parse(begin, end);
  } catch (const std::exception& e) {
    return make_error(std::string("header could not be parsed: ") + e.what());
  }
}

bool as_u64(const json& v, uint64_t* out) {
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

std::string offsets_str(uint64_t b, uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + "]";
}

// Validates one header entry; fills everything but `data`.
Status parse_entry(const std::string& name, const json& v, uint64_t data_size, SafetensorsEntry* out) {
  const std::string t = "tensor '" + name + "'";
  if (!v.is_object()) return make_error(t + " must be a JSON object, got " + brief(v));
  auto dt = v.find("dtype");
  if (dt == v.end()) return make_error(t + " has no dtype");
  if (!dt->is_string()) return make_error(t + " dtype must be a string, got " + brief(*dt));
  const std::string& dname = dt->get_ref<const std::string&>();
  std::optional<DType> dtype = dtype_from_name(dname);
  if (!dtype)
    return make_error(t + " has dtype " + dname +
                      ", which tensorfold does not support (supported: " + supported_dtypes() + ")");
  auto sh = v.find("shape");
  if (sh == v.end()) return make_error(t + " has no shape");
  if (!sh->is_array())
    return make_error(t + " shape must be a list of non-negative integers, got " + brief(*sh));
  Shape shape;
  uint64_t numel = 1;
  bool numel_overflow = false;
  for (const json& d : *sh) {
    uint64_t n;
    if (!as_u64(d, &n) || n > static_cast<uint64_t>(INT64_MAX))
      return make_error(t + " shape must be a list of non-negative integers, got " + brief(*sh));
    shape.push_back(static_cast<int64_t>(n));
    if (__builtin_mul_overflow(numel, n, &numel)) numel_overflow = true;
  }
  auto off = v.find("data_offsets");
  if (off == v.end()) return make_error(t + " has no data_offsets");
  uint64_t b = 0, e = 0;
  if (!off->is_array() || off->size() != 2 || !as_u64((*off)[0], &b) || !as_u64((*off)[1], &e))
    return make_error(t + " data_offsets must be two non-negative integers [begin, end], got " + brief(*off));
  if (b > e) return make_error(t + " data_offsets " + offsets_str(b, e) + " end before they begin");
  if (e > data_size)
    return make_error(t + " data_offsets " + offsets_str(b, e) + " run past the end of the data section (" +
                      std::to_string(data_size) + " bytes; truncated file?)");
  uint64_t need = 0;
  if (numel_overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(*dtype)), &need))
    return make_error(t + " shape " + shape_str(shape) + " is too large to address");
  if (need != e - b)
    return make_error(t + " data_offsets " + offsets_str(b, e) + " hold " + std::to_string(e - b) +
                      " bytes but " + dname + " " + shape_str(shape) + " needs " + std::to_string(need));
  out->name = name;
  out->dtype = *dtype;
  out->shape = std::move(shape);
  out->begin = b;
  out->end = e;
  return {};
}

}  // namespace

std::string one_line(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

Expected<SafetensorsFile> SafetensorsFile::parse(std::shared_ptr<const void> owner, const uint8_t* bytes,
                                                 size_t size, std::string path, std::string label) {
  auto fail = [&](const std::string& msg) { return make_error(one_line(label + ": " + msg)); };
  if (size < 8)
    return fail("file is " + std::to_string(size) +
                " bytes, too short to hold the 8-byte header length (truncated?)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > kSafetensorsMaxHeaderBytes)
    return fail("header length " + std::to_string(n) + " exceeds the limit of " +
                std::to_string(kSafetensorsMaxHeaderBytes) + " bytes (not a safetensors file?)");
  if (n > size - 8)
    return fail("header length " + std::to_string(n) + " runs past the end of the file (" +
                std::to_string(size) + " bytes; truncated?)");
  if (n < 2) return fail("header of " + std::to_string(n) + " bytes cannot hold a JSON object");
  const char* hb = reinterpret_cast<const char*>(bytes + 8);
  auto parsed = parse_header_json(hb, hb + n);
  if (!parsed.ok()) return fail(parsed.error().message);
  const json& root = *parsed;
  if (!root.is_object()) return fail("header must be a JSON object, got " + brief(root));

  SafetensorsFile f;
  f.owner_ = std::move(owner);
  f.bytes_ = bytes;
  f.size_ = size;
  f.header_size_ = static_cast<size_t>(n);
  f.path_ = std::move(path);
  f.label_ = label;
  const uint64_t data_size = size - 8 - n;
  const uint8_t* data = bytes + 8 + n;
  f.entries_.reserve(root.size());
  for (auto it = root.begin(); it != root.end(); ++it) {  // std::map order: sorted by name
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return fail("__metadata__ must be an object of strings, got " + brief(*it));
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          return fail("__metadata__ must map strings to strings, but '" + m.key() + "' holds " + brief(*m));
        f.metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    SafetensorsEntry e;
    if (Status s = parse_entry(it.key(), *it, data_size, &e); !s.ok()) return fail(s.error().message);
    e.data = data + e.begin;
    f.entries_.push_back(std::move(e));
  }

  // Overlap: sort the non-empty ranges by start; each must begin at or after the previous end.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : f.entries_)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsEntry* a = by_offset[i - 1];
    const SafetensorsEntry* b = by_offset[i];
    if (b->begin < a->end)
      return fail("tensors '" + a->name + "' " + offsets_str(a->begin, a->end) + " and '" + b->name + "' " +
                  offsets_str(b->begin, b->end) + " overlap");
  }
  return f;
}

Expected<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::string label = base_name(path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return make_error(path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(path + ": not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    uint8_t none[1] = {0};
    return parse(nullptr, none, size, path, label);  // reports the short file without mapping it
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (addr == MAP_FAILED) return make_error(path + ": cannot map: " + std::strerror(err));
  std::shared_ptr<const void> owner(addr, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  return parse(std::move(owner), static_cast<const uint8_t*>(addr), size, path, std::move(label));
}

Expected<SafetensorsFile> SafetensorsFile::from_memory(const void* data, size_t size, std::string label) {
  static const uint8_t kEmpty[1] = {0};
  const uint8_t* p = data ? static_cast<const uint8_t*>(data) : kEmpty;
  return parse(nullptr, p, data ? size : 0, label, label);
}

Expected<SafetensorsFile> SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, std::string label) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  const uint8_t* p = owned->data();
  size_t size = owned->size();
  if (size == 0) return from_memory(nullptr, 0, std::move(label));
  return parse(std::shared_ptr<const void>(owned, owned.get()), p, size, label, label);
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

}  // namespace tf
