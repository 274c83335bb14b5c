// How fast the kernel copies into and out of user pages it has never
// touched before, against pages it has. Pages are always written by the
// process first (memset), so only the kernel's first access differs.
//
//   gcc -O2 -Wall -o /tmp/kernel_first_touch bench/probes/kernel_first_touch.c
//   /tmp/kernel_first_touch
//
// Three measurements of 8 MiB in 1 MiB calls:
//   read(2) from /dev/zero into this process's pages;
//   process_vm_readv from a child's buffer into this process's pages;
//   process_vm_writev from this process's pages into a child's buffer;
// each once on fresh buffers and again on the same ones, and, for the
// single copies, with only the other process's buffer fresh.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe_clock.h"

enum { kBytes = 8 << 20, kPiece = 1 << 20, kBuffers = 2 };

static char* writtenBuffer(int value) {
  char* b = aligned_alloc(4096, kBytes);
  if (b == NULL) {
    perror("aligned_alloc");
    exit(1);
  }
  memset(b, value, kBytes);
  return b;
}

static void die(const char* what) {
  perror(what);
  exit(1);
}

static double readZero(int fd, char* to) {
  double t0 = now();
  for (size_t o = 0; o < kBytes; o += kPiece) {
    if (read(fd, to + o, kPiece) != kPiece) die("read /dev/zero");
  }
  return kBytes / (now() - t0) / 1e9;
}

// GB/s of one 8 MiB single copy between `local` and the child's `remote`.
static double singleCopy(pid_t child, int write, char* local, char* remote) {
  double t0 = now();
  for (size_t o = 0; o < kBytes; o += kPiece) {
    struct iovec l = {local + o, kPiece}, r = {remote + o, kPiece};
    ssize_t n = write ? process_vm_writev(child, &l, 1, &r, 1, 0)
                      : process_vm_readv(child, &l, 1, &r, 1, 0);
    if (n != kPiece) die(write ? "process_vm_writev" : "process_vm_readv");
  }
  return kBytes / (now() - t0) / 1e9;
}

int main(void) {
  int fd = open("/dev/zero", O_RDONLY);
  if (fd < 0) die("open /dev/zero");
  char* b = writtenBuffer(1);
  double first = readZero(fd, b);
  double again = readZero(fd, b);
  printf("read /dev/zero:    fresh pages %6.2f GB/s, same pages again %6.2f GB/s\n", first, again);

  int toParent[2], toChild[2];
  if (pipe(toParent) != 0 || pipe(toChild) != 0) die("pipe");
  pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) {
    // Two fresh buffers per direction, addresses sent to the parent; stays
    // alive until the parent writes a byte.
    char* mine[2 * kBuffers];
    for (int i = 0; i < 2 * kBuffers; ++i) mine[i] = writtenBuffer(2);
    if (write(toParent[1], mine, sizeof(mine)) != (ssize_t)sizeof(mine)) _exit(1);
    char c;
    if (read(toChild[0], &c, 1) != 1) _exit(1);
    _exit(0);
  }
  char* remote[2 * kBuffers];
  if (read(toParent[0], remote, sizeof(remote)) != (ssize_t)sizeof(remote)) die("read addresses");
  for (int w = 0; w <= 1; ++w) {
    char* local[kBuffers];
    for (int i = 0; i < kBuffers; ++i) local[i] = writtenBuffer(3);
    char** theirs = remote + w * kBuffers;
    double bothFresh = singleCopy(child, w, local[0], theirs[0]);
    double sameAgain = singleCopy(child, w, local[0], theirs[0]);
    double remoteFresh = singleCopy(child, w, local[0], theirs[1]);
    double localFresh = singleCopy(child, w, local[1], theirs[0]);
    printf("%s: both fresh %6.2f GB/s, again %6.2f, only the child's fresh %6.2f, "
           "only this process's fresh %6.2f\n",
           w ? "process_vm_writev" : "process_vm_readv ", bothFresh, sameAgain, remoteFresh,
           localFresh);
  }
  if (write(toChild[1], "x", 1) != 1) die("write");
  waitpid(child, NULL, 0);
  return 0;
}
