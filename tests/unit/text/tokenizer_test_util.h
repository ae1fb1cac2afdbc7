// Shared helpers for the tokenizer tests: paths of committed/fetched data and a JSONL reader.
#pragma once
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tf::testing {

inline std::string source_path(const std::string& rel) { return std::string(TF_SOURCE_DIR) + "/" + rel; }

inline bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace tf::testing
