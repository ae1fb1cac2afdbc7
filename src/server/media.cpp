#include "server/media.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <memory>

namespace tf {
namespace {

int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string img(int index) { return "image " + std::to_string(index); }

Expected<std::vector<uint8_t>> from_data_url(const std::string& url, int index) {
  size_t comma = url.find(',');
  if (comma == std::string::npos) return make_error(img(index) + ": malformed data: URL (no ',')");
  std::string meta = lower(url.substr(5, comma - 5));  // after "data:"
  const std::string b64 = ";base64";
  if (meta.size() < b64.size() || meta.compare(meta.size() - b64.size(), b64.size(), b64) != 0)
    return make_error(img(index) + ": data: URLs must be base64-encoded (data:image/png;base64,...)");
  std::string mime = meta.substr(0, meta.size() - b64.size());
  if (size_t semi = mime.find(';'); semi != std::string::npos) mime = mime.substr(0, semi);
  if (mime != "image/png" && mime != "image/jpeg" && mime != "image/jpg" && mime != "image/webp")
    return make_error(img(index) + " is not PNG, JPEG or WebP; send one of those");
  auto bytes = base64_decode_strict(std::string_view(url).substr(comma + 1));
  if (!bytes.ok()) return make_error(img(index) + ": " + bytes.error().message);
  if (bytes->empty()) return make_error(img(index) + ": the data: URL holds no bytes");
  return bytes;
}

Expected<std::string> percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (i + 2 >= s.size()) return make_error("bad percent escape");
    int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0) return make_error("bad percent escape");
    char c = static_cast<char>(hi * 16 + lo);
    if (c == '\0') return make_error("bad percent escape");
    out += c;
    i += 2;
  }
  return out;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Expected<std::vector<uint8_t>> from_file_url(const std::string& url, int index, const MediaPolicy& policy) {
  if (policy.allowed_dir.empty())
    return make_error(img(index) +
                      ": file:// image URLs are disabled; start the server with --allowed-media-dir DIR "
                      "or send the image as a data: URL");
  std::string rest = url.substr(7);  // after "file://"
  if (lower(rest.substr(0, 9)) == "localhost") rest = rest.substr(9);
  if (rest.empty() || rest[0] != '/')
    return make_error(img(index) + ": file:// URLs must name an absolute local path (file:///path)");
  auto path = percent_decode(rest);
  if (!path.ok()) return make_error(img(index) + ": malformed file:// URL (" + path.error().message + ")");

  char dir_buf[PATH_MAX], file_buf[PATH_MAX];
  if (!::realpath(policy.allowed_dir.c_str(), dir_buf))
    return make_error(img(index) + ": --allowed-media-dir is no longer accessible");
  std::string dir = dir_buf;
  if (dir.back() != '/') dir += '/';
  const std::string outside = img(index) + ": file path is outside --allowed-media-dir";
  // realpath resolves '..' and every symlink, so a link inside DIR that points out is refused.
  if (!::realpath(path->c_str(), file_buf)) {
    // Say "not found" only for paths that are inside DIR, so the error does not probe the disk.
    std::string lexical = *path;
    if (lexical.rfind(dir, 0) != 0 || lexical.find("/../") != std::string::npos) return make_error(outside);
    return make_error(img(index) + ": file not found under --allowed-media-dir");
  }
  std::string real = file_buf;
  if (real.rfind(dir, 0) != 0) return make_error(outside);
  Fd f;
  f.fd = ::open(real.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (f.fd < 0) return make_error(img(index) + ": cannot open the file");
  // Re-check the opened file's path: a component swapped for a symlink after realpath is caught.
  char link_buf[PATH_MAX];
  std::string proc = "/proc/self/fd/" + std::to_string(f.fd);
  ssize_t n = ::readlink(proc.c_str(), link_buf, sizeof(link_buf) - 1);
  if (n <= 0) return make_error(img(index) + ": cannot open the file");
  if (std::string(link_buf, static_cast<size_t>(n)).rfind(dir, 0) != 0) return make_error(outside);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) return make_error(img(index) + ": not a regular file");
  if (st.st_size > policy.max_bytes)
    return make_error(img(index) + ": file is larger than the request size limit (--max-body-mb)");
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t r = ::read(f.fd, bytes.data() + got, bytes.size() - got);
    if (r <= 0) return make_error(img(index) + ": error reading the file");
    got += static_cast<size_t>(r);
  }
  if (bytes.empty()) return make_error(img(index) + ": the file is empty");
  return bytes;
}

}  // namespace

Expected<std::vector<uint8_t>> base64_decode_strict(std::string_view text) {
  if (text.size() % 4 != 0) return make_error("invalid base64: length is not a multiple of 4");
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = (text.size() >= 2 && text[text.size() - 2] == '=') ? 2 : 1;
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int v[4];
    for (int k = 0; k < 4; ++k) {
      unsigned char c = static_cast<unsigned char>(text[i + k]);
      if (last && c == '=' && k >= 4 - static_cast<int>(pad)) {
        v[k] = 0;
        continue;
      }
      v[k] = b64_value(c);
      if (v[k] < 0)
        return make_error("invalid base64: unexpected character at offset " + std::to_string(i + k));
    }
    uint32_t triple =
        (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
    size_t keep = last ? 3 - pad : 3;
    for (size_t k = 0; k < keep; ++k) out.push_back(static_cast<uint8_t>(triple >> (16 - 8 * k)));
  }
  return out;
}

Expected<std::vector<uint8_t>> load_image_url(const std::string& url, int index, const MediaPolicy& policy) {
  std::string scheme = lower(url.substr(0, std::min<size_t>(url.size(), 8)));
  if (scheme.rfind("data:", 0) == 0) {
    if (url.size() - 5 > static_cast<size_t>(policy.max_bytes) * 4 / 3 + 64)
      return make_error(img(index) + ": data: URL is larger than the request size limit");
    return from_data_url(url, index);
  }
  if (scheme.rfind("file://", 0) == 0) return from_file_url(url, index, policy);
  if (scheme.rfind("http://", 0) == 0 || scheme.rfind("https://", 0) == 0)
    return make_error(img(index) +
                      ": http(s) image URLs are not fetched by this server; send the image inline as a "
                      "base64 data: URL");
  return make_error(img(index) +
                    ": unsupported image URL; send a base64 data: URL (data:image/png;base64,...)");
}

}  // namespace tf
