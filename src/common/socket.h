// TCP socket helpers shared by the store and the TCP transport: resolving,
// listening, connecting with a deadline, and whole-buffer send/recv over
// non-blocking sockets. Functions here never throw for I/O outcomes; they
// return IoResult so each layer can raise its own error type, except where
// a function's comment says it throws.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/deadline.h"
#include "common/fd.h"

namespace meshcomm {

enum class IoStatus {
  kOk,
  kTimeout,  // the deadline passed first
  kClosed,   // orderly EOF from the peer
  kError,    // a socket error; errno value in IoResult::err
};

struct IoResult {
  IoStatus status = IoStatus::kOk;
  int err = 0;
  bool ok() const { return status == IoStatus::kOk; }
  // "timed out", "connection closed by peer", or strerror(err).
  std::string describe() const;
};

// Creates a listening TCP socket (non-blocking, close-on-exec, SO_REUSEADDR)
// on host:port; host "" or "0.0.0.0" means every IPv4 interface, "::" every
// interface. Returns the fd and writes the bound port (useful with port 0).
// Throws InvalidArgument when host cannot be resolved, Error when no
// address can be bound (the message names the address and errno).
Fd listenTcp(const std::string& host, uint16_t port, int backlog,
             uint16_t* boundPort);

// One connection attempt to host:port, trying each resolved address until
// the deadline. On success returns a connected non-blocking socket with
// TCP_NODELAY. On failure returns an invalid Fd and the reason in *why.
Fd tryConnectTcp(const std::string& host, uint16_t port,
                 const Deadline& deadline, std::string* why);

void setNonBlocking(int fd);
void setNoDelay(int fd);
void setKeepAlive(int fd);
// Asks the kernel for a send buffer of `bytes` (it doubles the figure for
// its bookkeeping and stops autotuning the buffer); nothing if bytes <= 0.
void setSendBuffer(int fd, int bytes);

// Sends or receives exactly len bytes on a non-blocking socket, polling
// until done, the peer closes, an error occurs, or the deadline passes.
IoResult sendAll(int fd, const void* data, size_t len,
                 const Deadline& deadline);
IoResult recvAll(int fd, void* data, size_t len, const Deadline& deadline);

// Waits until fd is readable (POLLIN) or the deadline passes.
IoResult waitReadable(int fd, const Deadline& deadline);

// "host:port" of the local or remote end of a connected socket.
std::string localAddress(int fd);
std::string peerAddress(int fd);

// This host's name (gethostname).
std::string hostName();

}  // namespace meshcomm
