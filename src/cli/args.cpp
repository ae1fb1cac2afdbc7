#include "cli/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tf::cli {

Expected<Args> parse_args(int argc, char** argv, int first, const std::set<std::string>& value_flags,
                          const std::set<std::string>& bool_flags) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0 || s == "--") {
      a.positional.push_back(s);
      continue;
    }
    std::string name = s, value;
    bool inline_value = false;
    if (auto eq = s.find('='); eq != std::string::npos) {
      name = s.substr(0, eq);
      value = s.substr(eq + 1);
      inline_value = true;
    }
    if (value_flags.count(name)) {
      if (!inline_value) {
        if (i + 1 >= argc) return make_error(name + " needs a value");
        value = argv[++i];
      }
      a.values[name] = value;
    } else if (bool_flags.count(name) && !inline_value) {
      a.flags.insert(name);
    } else {
      return make_error("unknown flag " + name + " (see --help)");
    }
  }
  return a;
}

Expected<double> to_number(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != 0 || errno != 0 || !std::isfinite(d))
    return make_error(flag + " must be a number, got '" + v + "'");
  return d;
}

Expected<int64_t> to_int(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  long long d = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != 0 || errno != 0) return make_error(flag + " must be an integer, got '" + v + "'");
  return static_cast<int64_t>(d);
}

Expected<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace tf::cli
