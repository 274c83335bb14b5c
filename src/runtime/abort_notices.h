// Abort notices: how a rank learns that a member aborted one of its groups
// while the rank is not communicating on it.
//
// A group's abort travels along several paths: the aborting rank's TCP
// connections (an abort frame), its host's shared-memory abort line, and the
// store (transport/peer_monitor.h). The first two reach only the ranks
// connected to it or on its host; the store reaches every member, but a
// rank used to read it only while one of its operations waited. So a rank
// that issued an operation over TCP after the abort could find every byte
// it needed already delivered and succeed, while the other ranks failed the
// same call.
//
// AbortNotice is a group's record of a member's abort, set once and checked
// by every operation before it starts, at the cost of one atomic load; its
// listener (the group) also ends the operation in flight, if any.
// AbortNoticeWatcher, one thread per World, waits on a store connection of
// its own for the job's next abort notice (PeerMonitor::abortNoticeKey) and
// sets the AbortNotice of the group the notice names. Waiting costs nothing
// while no group aborts: the store holds the wait until the notice exists.
//
// Thread-safety: every member of both classes may be called from any
// thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "meshcomm/store.h"

namespace meshcomm {

class AbortNotice {
 public:
  using Listener = std::function<void(const std::exception_ptr& error)>;
  // The first call wins and calls the listener; later ones change nothing.
  void set(std::exception_ptr error) EXCLUDES(mu_);
  // Called on set()'s thread when the notice arrives. Replacing or
  // clearing it waits for a call in progress, so the owner of what it
  // refers to clears it before going away.
  void listen(Listener listener) EXCLUDES(mu_);
  bool arrived() const { return state_.load(std::memory_order_acquire) == kSet; }
  // The error the notice stands for, or null before it arrived.
  std::exception_ptr error() const { return arrived() ? error_ : nullptr; }
  void throwIfArrived() const {
    if (arrived()) std::rethrow_exception(error_);
  }

 private:
  static constexpr int kIdle = 0, kWriting = 1, kSet = 2;
  std::atomic<int> state_{kIdle};
  std::exception_ptr error_;  // written once, before state_ becomes kSet
  Mutex mu_;
  Listener listener_ GUARDED_BY(mu_);
};

class AbortNoticeWatcher {
 public:
  // `connection`: used by the watcher alone, since its waits block it;
  // `jobPrefix`: where the job's keys live in that store. Starts the thread.
  AbortNoticeWatcher(std::shared_ptr<TCPStore> connection, const std::string& jobPrefix);
  // Interrupts the store wait and joins the thread.
  ~AbortNoticeWatcher();
  AbortNoticeWatcher(const AbortNoticeWatcher&) = delete;
  AbortNoticeWatcher& operator=(const AbortNoticeWatcher&) = delete;

  // From now on a notice about the group whose abort key (relative to the
  // job) is `abortKey` sets `notice`, for as long as its owner keeps it.
  void watch(const std::string& abortKey, const std::shared_ptr<AbortNotice>& notice)
      EXCLUDES(mu_);

 private:
  void run();
  // Sets the notice of the group `abortKey` names, if this rank has it.
  void deliver(const std::string& abortKey) EXCLUDES(mu_);

  std::shared_ptr<TCPStore> connection_;
  std::shared_ptr<Store> jobStore_;  // connection_ seen through the job's prefix
  std::atomic<bool> stopping_{false};
  Mutex mu_;
  std::map<std::string, std::weak_ptr<AbortNotice>> watched_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace meshcomm
