// Noticing that a client left while its request waits on the engine. cpp-httplib 0.11 does not
// expose a handler's socket, so it is found once per request by its address pair, then polled.
#pragma once
#include <string>

namespace tf {

// The connected socket with these endpoints (as httplib formats them), or -1 when not found.
int find_connection_fd(const std::string& local_addr, int local_port, const std::string& remote_addr,
                       int remote_port);

// True once the peer closed or reset the connection. Only call it from the thread serving the
// request (the fd belongs to that connection until the handler returns).
bool peer_closed(int fd);

}  // namespace tf

namespace tf {

// cpp-httplib 0.11 listens with a backlog of 5, so a burst of new connections overflows the accept
// queue and waits for a SYN retry (about 1 s). Linux lets listen() be called again to raise it;
// this finds the listening socket on `port` and does that. Returns false if none was found.
bool raise_listen_backlog(int port, int backlog);

}  // namespace tf
