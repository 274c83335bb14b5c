// How many bytes per second TCP itself moves on this machine, in the
// patterns meshcomm's all_reduce uses: P processes in a ring, each sending
// to its right neighbour and receiving from its left one at once (P = 2:
// both directions of one pair, as the ring and the hierarchical leaders'
// exchange do), over K connections per neighbour; or one way only. Each
// process is one thread driving its sockets with poll(2), non-blocking, as
// a meshcomm rank does, so the figure is what one such thread can get out
// of the kernel: the ceiling of a collective's bus bandwidth over TCP.
//
//   gcc -O2 -Wall -o /tmp/tcp_streams bench/probes/tcp_streams.c
//   /tmp/tcp_streams --ranks 2 --streams 1 --seconds 3
//   /tmp/tcp_streams --ranks 2 --oneway --netns NS0,NS1 --addrs 10.0.0.1,10.0.0.2
//
// Options: --ranks P (2), --streams K per neighbour (1), --seconds T (3,
// at most 60), --oneway (P = 2: rank 0 sends, rank 1 receives), --sndbuf B
// / --rcvbuf B (SO_SNDBUF/SO_RCVBUF; default: the kernel's autotuning),
// --netns a,b,... (rank i enters namespace i mod the count; needs root),
// --addrs a,b,... (rank i listens on address i mod the count; default
// 127.0.0.1), --port BASE (rank i listens on BASE+i; default: random).
//
// Prints one line: the mean over ranks of the bytes each sent per second
// (for a ring all_reduce, the bus bandwidth if nothing else took time),
// measured from 0.5 s after the start to the end, in GB/s and Gbit/s, and
// the slowest rank's. Every step has a deadline: a rank that cannot
// connect in 10 s or finish in T + 10 s exits with an error.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe_clock.h"

enum { kMaxRanks = 16, kMaxStreams = 16, kBufBytes = 4 << 20 };

static int ranks = 2, streams = 1, oneway = 0, sndbuf = 0, rcvbuf = 0, basePort = 0;
static double seconds = 3.0;
static const double kWarmup = 0.5;
static char* netns[kMaxRanks];
static int netnsCount = 0;
static char* addrs[kMaxRanks];
static int addrCount = 0;

static void die(int rank, const char* what) {
  fprintf(stderr, "tcp_streams: rank %d: %s: %s\n", rank, what, strerror(errno));
  exit(1);
}

static int split(char* list, char** out) {
  int n = 0;
  for (char* s = strtok(list, ","); s && n < kMaxRanks; s = strtok(NULL, ",")) out[n++] = s;
  return n;
}

static void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (sndbuf > 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
}

static struct sockaddr_in addressOf(int rank) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)(basePort + rank));
  const char* host = addrCount ? addrs[rank % addrCount] : "127.0.0.1";
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    fprintf(stderr, "tcp_streams: '%s' is not an IPv4 address\n", host);
    exit(2);
  }
  return a;
}

// One rank: writes to resultFd the bytes per second it sent (-1: none).
static void runRank(int rank, int resultFd) {
  if (netnsCount) {
    char path[512];
    snprintf(path, sizeof(path), "/var/run/netns/%s", netns[rank % netnsCount]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) die(rank, path);
    close(fd);
  }
  const int right = (rank + 1) % ranks;
  const int sends = !oneway || rank == 0, receives = !oneway || rank == 1;
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  tune(listener);  // accepted sockets inherit the buffer sizes
  struct sockaddr_in mine = addressOf(rank);
  if (bind(listener, (struct sockaddr*)&mine, sizeof(mine)) != 0) die(rank, "bind");
  if (listen(listener, kMaxStreams) != 0) die(rank, "listen");

  // Each socket with what it carries. With two ranks both directions
  // share the connections, as between two meshcomm ranks: rank 0 dials,
  // rank 1 accepts. With more, each rank dials its right neighbour and
  // accepts its left one.
  struct Stream {
    int fd, sends, receives;
  } s[2 * kMaxStreams];
  int n = 0;
  const int shared = ranks == 2;
  const double connectBy = now() + 10.0;
  struct sockaddr_in peer = addressOf(right);
  const int dials = shared ? rank == 0 : sends;
  const int accepts = shared ? rank == 1 : receives;
  for (int k = 0; dials && k < streams;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    tune(fd);
    if (connect(fd, (struct sockaddr*)&peer, sizeof(peer)) == 0) {
      s[n++] = (struct Stream){fd, sends, shared && receives};
      ++k;
      continue;
    }
    close(fd);
    if (now() > connectBy) die(rank, "connect");
    usleep(10000);
  }
  for (int k = 0; accepts && k < streams;) {
    struct pollfd p = {listener, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0 && now() > connectBy) die(rank, "accept (no peer came)");
    if (!(p.revents & POLLIN)) continue;
    int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) die(rank, "accept");
    s[n++] = (struct Stream){fd, shared && sends, receives};
    ++k;
  }
  for (int i = 0; i < n; ++i) fcntl(s[i].fd, F_SETFL, O_NONBLOCK);

  char* buf = malloc(kBufBytes);
  char* sink = malloc(kBufBytes);
  memset(buf, 1, kBufBytes);
  memset(sink, 0, kBufBytes);
  const double start = now(), from = start + kWarmup, until = start + seconds;
  const double giveUp = until + 10.0;
  long long sentInWindow = 0;
  int writing = 0, reading = 0;
  for (int i = 0; i < n; ++i) writing += s[i].sends, reading += s[i].receives;
  while (writing > 0 || reading > 0) {
    double t = now();
    if (t > giveUp) die(rank, "did not finish in time");
    if (t >= until && writing > 0) {
      for (int i = 0; i < n; ++i) {
        if (s[i].sends) shutdown(s[i].fd, SHUT_WR);
        s[i].sends = 0;
      }
      writing = 0;
    }
    struct pollfd fds[2 * kMaxStreams];
    for (int i = 0; i < n; ++i) {
      short events = (short)((s[i].sends ? POLLOUT : 0) | (s[i].receives ? POLLIN : 0));
      fds[i] = (struct pollfd){events ? s[i].fd : -1, events, 0};
    }
    if (poll(fds, (nfds_t)n, 100) < 0 && errno != EINTR) die(rank, "poll");
    for (int i = 0; i < n; ++i) {
      if ((fds[i].revents & POLLOUT) && s[i].sends) {
        ssize_t w = send(s[i].fd, buf, kBufBytes, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno != EAGAIN && errno != EINTR) die(rank, "send");
        double after = now();
        if (w > 0 && after >= from && after < until) sentInWindow += w;
      }
      if ((fds[i].revents & (POLLIN | POLLHUP)) && s[i].receives) {
        ssize_t r = recv(s[i].fd, sink, kBufBytes, MSG_DONTWAIT);
        if (r < 0 && errno != EAGAIN && errno != EINTR) die(rank, "recv");
        if (r == 0) s[i].receives = 0, --reading;
      }
    }
  }
  double rate = sends ? (double)sentInWindow / (seconds - kWarmup) : -1.0;
  if (write(resultFd, &rate, sizeof(rate)) != (ssize_t)sizeof(rate)) die(rank, "report");
  exit(0);
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--oneway")) { oneway = 1; continue; }
    if (!v) { fprintf(stderr, "tcp_streams: %s needs a value\n", a); return 2; }
    ++i;
    if (!strcmp(a, "--ranks")) ranks = atoi(v);
    else if (!strcmp(a, "--streams")) streams = atoi(v);
    else if (!strcmp(a, "--seconds")) seconds = atof(v);
    else if (!strcmp(a, "--sndbuf")) sndbuf = atoi(v);
    else if (!strcmp(a, "--rcvbuf")) rcvbuf = atoi(v);
    else if (!strcmp(a, "--port")) basePort = atoi(v);
    else if (!strcmp(a, "--netns")) netnsCount = split(strdup(v), netns);
    else if (!strcmp(a, "--addrs")) addrCount = split(strdup(v), addrs);
    else { fprintf(stderr, "tcp_streams: unknown option %s\n", a); return 2; }
  }
  if (ranks < 2 || ranks > kMaxRanks || streams < 1 || streams > kMaxStreams ||
      seconds <= kWarmup || seconds > 60 || (oneway && ranks != 2)) {
    fprintf(stderr, "tcp_streams: need 2 <= --ranks <= %d, 1 <= --streams <= %d, "
                    "%.1f < --seconds <= 60, --oneway only with 2 ranks\n",
            kMaxRanks, kMaxStreams, kWarmup);
    return 2;
  }
  if (basePort == 0) {
    srand((unsigned)getpid() ^ (unsigned)time(NULL));
    basePort = 10000 + rand() % 20000;  // below the ephemeral ports (32768-)
  }
  int results[2];
  if (pipe(results) != 0) return 1;
  pid_t pids[kMaxRanks];
  for (int r = 0; r < ranks; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) runRank(r, results[1]);
  }
  close(results[1]);
  int failed = 0;
  for (int r = 0; r < ranks; ++r) {
    int status;
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  if (failed) {
    fprintf(stderr, "tcp_streams: a rank failed\n");
    return 1;
  }
  double sum = 0, slowest = 1e30, rate;
  int senders = 0;
  while (read(results[0], &rate, sizeof(rate)) == (ssize_t)sizeof(rate)) {
    if (rate < 0) continue;
    sum += rate;
    ++senders;
    if (rate < slowest) slowest = rate;
  }
  double mean = sum / senders;
  printf("ranks=%d streams=%d %s: %.2f GB/s (%.1f Gbit/s) per sending rank, slowest %.2f GB/s\n",
         ranks, streams, oneway ? "one way" : "ring, both directions", mean / 1e9, mean * 8 / 1e9,
         slowest / 1e9);
  return 0;
}
