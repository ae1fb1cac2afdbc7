// Minimal leveled logging to stderr; one line per call, timestamped.
#pragma once
#include <string>

namespace tf {
enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };
void set_log_level(LogLevel level);
LogLevel log_level();
void log_line(LogLevel level, const std::string& line);
inline void log_info(const std::string& s) { log_line(LogLevel::Info, s); }
inline void log_warn(const std::string& s) { log_line(LogLevel::Warn, s); }
inline void log_error(const std::string& s) { log_line(LogLevel::Error, s); }
inline void log_debug(const std::string& s) { log_line(LogLevel::Debug, s); }
}  // namespace tf
