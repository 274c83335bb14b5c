#include "common/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "meshcomm/error.h"

namespace meshcomm {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// Resolves host:port for TCP; returns nullptr and sets *why on failure.
AddrInfoPtr resolve(const std::string& host, uint16_t port, bool passive,
                    std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const char* node = host.empty() ? nullptr : host.c_str();
  std::string service = std::to_string(port);
  addrinfo* out = nullptr;
  int rc = getaddrinfo(node, service.c_str(), &hints, &out);
  if (rc != 0) {
    *why = "cannot resolve '" + host + "': " + gai_strerror(rc);
    return nullptr;
  }
  return AddrInfoPtr(out);
}

std::string formatSockaddr(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {0};
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
    port = ntohs(in->sin_port);
    return std::string(buf) + ":" + std::to_string(port);
  }
  if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
    port = ntohs(in6->sin6_port);
    std::string out = "[";
    out += buf;
    out += "]:";
    out += std::to_string(port);
    return out;
  }
  return "?";
}

IoResult pollFor(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.pollTimeoutMs());
    if (rc > 0) return {};
    if (rc == 0) return {IoStatus::kTimeout, 0};
    if (errno != EINTR) return {IoStatus::kError, errno};
  }
}

}  // namespace

std::string IoResult::describe() const {
  switch (status) {
    case IoStatus::kOk: return "ok";
    case IoStatus::kTimeout: return "timed out";
    case IoStatus::kClosed: return "connection closed by peer";
    case IoStatus::kError: return std::strerror(err);
  }
  return "unknown";
}

void setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void setSendBuffer(int fd, int bytes) {
  if (bytes > 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
}

void setKeepAlive(int fd) {
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

Fd listenTcp(const std::string& host, uint16_t port, int backlog,
             uint16_t* boundPort) {
  std::string why;
  std::string bindHost = (host == "0.0.0.0") ? "" : host;
  AddrInfoPtr ai = resolve(bindHost, port, /*passive=*/true, &why);
  if (!ai) throw InvalidArgument(why);
  std::string lastError = "no usable address";
  for (addrinfo* a = ai.get(); a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                   a->ai_protocol));
    if (!fd) {
      lastError = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 ||
        ::listen(fd.get(), backlog) != 0) {
      lastError = std::strerror(errno);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
    *boundPort = ss.ss_family == AF_INET6
                     ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                     : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    return fd;
  }
  throw Error("cannot listen on " + (host.empty() ? "*" : host) + ":" +
              std::to_string(port) + ": " + lastError);
}

Fd tryConnectTcp(const std::string& host, uint16_t port,
                 const Deadline& deadline, std::string* why) {
  AddrInfoPtr ai = resolve(host, port, /*passive=*/false, why);
  if (!ai) return Fd();
  for (addrinfo* a = ai.get(); a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                   a->ai_protocol));
    if (!fd) {
      *why = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno != EINPROGRESS) {
      *why = std::strerror(errno);
      continue;
    }
    if (rc != 0) {
      IoResult r = pollFor(fd.get(), POLLOUT, deadline);
      if (!r.ok()) {
        *why = r.describe();
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        *why = std::strerror(err);
        continue;
      }
    }
    setNoDelay(fd.get());
    return fd;
  }
  return Fd();
}

IoResult sendAll(int fd, const void* data, size_t len,
                 const Deadline& deadline) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      IoResult r = pollFor(fd, POLLOUT, deadline);
      if (!r.ok()) return r;
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return {IoStatus::kClosed, errno};
    }
    return {IoStatus::kError, errno};
  }
  return {};
}

IoResult recvAll(int fd, void* data, size_t len, const Deadline& deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    ssize_t n = ::recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return {IoStatus::kClosed, 0};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      IoResult r = pollFor(fd, POLLIN, deadline);
      if (!r.ok()) return r;
      continue;
    }
    if (errno == ECONNRESET) return {IoStatus::kClosed, errno};
    return {IoStatus::kError, errno};
  }
  return {};
}

IoResult waitReadable(int fd, const Deadline& deadline) {
  return pollFor(fd, POLLIN, deadline);
}

std::string hostName() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

std::string localAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return formatSockaddr(ss);
}

std::string peerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return formatSockaddr(ss);
}

}  // namespace meshcomm
