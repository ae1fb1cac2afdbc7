// Shared helpers for the tokenizer tests: paths of committed/fetched data and a JSONL reader.
#pragma once
#include <zlib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tf::testing {

inline std::string source_path(const std::string& rel) { return std::string(TF_SOURCE_DIR) + "/" + rel; }

inline bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

// Reads plain or gzip-compressed JSONL (the oracle's large goldens are committed as .jsonl.gz): gzread passes
// uncompressed files through unchanged. A missing file gives an empty vector, which callers check.
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  std::string data;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) data.append(buf, static_cast<size_t>(n));
  gzclose(f);
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    if (end > pos)
      out.push_back(nlohmann::json::parse(data.begin() + static_cast<std::ptrdiff_t>(pos),
                                          data.begin() + static_cast<std::ptrdiff_t>(end)));
    pos = end + 1;
  }
  return out;
}

}  // namespace tf::testing
