#include "server/client_conn.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

namespace tf {
namespace {

bool endpoint(const sockaddr_storage& ss, socklen_t len, std::string* ip, int* port) {
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&ss), len, host, sizeof(host), nullptr, 0,
                  NI_NUMERICHOST) != 0)
    return false;
  *ip = host;
  if (ss.ss_family == AF_INET)
    *port = ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  else if (ss.ss_family == AF_INET6)
    *port = ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  else
    return false;
  return true;
}

}  // namespace

int find_connection_fd(const std::string& local_addr, int local_port, const std::string& remote_addr,
                       int remote_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    sockaddr_storage peer{}, self{};
    socklen_t plen = sizeof(peer), slen = sizeof(self);
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &plen) != 0) continue;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&self), &slen) != 0) continue;
    std::string pip, sip;
    int pport = 0, sport = 0;
    if (!endpoint(peer, plen, &pip, &pport) || !endpoint(self, slen, &sip, &sport)) continue;
    if (pport == remote_port && sport == local_port && pip == remote_addr && sip == local_addr) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

bool peer_closed(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace tf

namespace tf {

bool raise_listen_backlog(int port, int backlog) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return false;
  bool done = false;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening)
      continue;
    sockaddr_storage self{};
    socklen_t slen = sizeof(self);
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&self), &slen) != 0) continue;
    std::string ip;
    int p = 0;
    if (endpoint(self, slen, &ip, &p) && p == port && ::listen(static_cast<int>(fd), backlog) == 0)
      done = true;
  }
  closedir(dir);
  return done;
}

}  // namespace tf
