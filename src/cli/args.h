// Tiny flag parser for the subcommands: --name VALUE / --flag, positionals in order.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace tf::cli {

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;  // --name VALUE
  std::set<std::string> flags;                // --flag

  bool has(const std::string& f) const { return flags.count(f) || values.count(f); }
  std::optional<std::string> get(const std::string& k) const {
    auto it = values.find(k);
    if (it == values.end()) return std::nullopt;
    return it->second;
  }
};

// value_flags take an argument; bool_flags do not. Unknown flags are an error.
Expected<Args> parse_args(int argc, char** argv, int first, const std::set<std::string>& value_flags,
                          const std::set<std::string>& bool_flags);

Expected<double> to_number(const std::string& flag, const std::string& v);
Expected<int64_t> to_int(const std::string& flag, const std::string& v);
Expected<std::string> read_file(const std::string& path);

}  // namespace tf::cli
