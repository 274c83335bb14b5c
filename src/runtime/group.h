// GroupImpl: one process group's state — its members, transport, executor
// and collective sequence number. ProcessGroup (the public class) checks
// arguments and hands operations to it.
//
// Thread-safety: the accessors are immutable after construction; run*()
// may be called from any thread. An operation runs holding its executor's
// engine lock, which guards the transport's use and the per-operation
// state (sequence numbers, scratch).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/agreement.h"
#include "collectives/comm.h"
#include "common/thread_annotations.h"
#include "meshcomm/process_group.h"
#include "runtime/abort_notices.h"
#include "runtime/executor.h"
#include "runtime/op_trace.h"
#include "transport/group_transport.h"

namespace meshcomm {

struct GroupConfig {
  std::string name;
  int rank = 0;
  std::vector<int> worldRanks;
  std::chrono::milliseconds timeout{0};
  // How flight-recorder records and traces name the group and its members:
  // name and worldRanks, except in a World that is not the process's first
  // (InitOptions::label), whose members keep their ranks in the job.
  std::string traceName;
  std::vector<int> traceRanks;
};

class GroupImpl {
 public:
  GroupImpl(GroupConfig config, GroupTransport transport);
  // Lets queued operations finish, then closes the transport.
  ~GroupImpl();

  const std::string& name() const { return config_.name; }
  int rank() const { return config_.rank; }
  int size() const { return static_cast<int>(config_.worldRanks.size()); }
  const std::vector<int>& worldRanks() const { return config_.worldRanks; }
  std::chrono::milliseconds timeout() const { return config_.timeout; }
  // How the members reach each other, for choosing algorithms.
  Route route() const { return links_.route; }

  // Runs a collective: body(Comm&) runs on the executor with a Comm
  // carrying the call's sequence number, signature and algorithm. A blocking call on
  // an idle group runs on the caller's thread without allocating (the
  // latency of small collectives is mostly what happens around them).
  template <class Body>
  WorkPtr runCollective(const char* opName, const MessageSignature& sig, Algorithm algorithm,
                        const OpOptions& options, Body&& body) {
    if (options.blocking && executor_->beginInline()) {
      std::exception_ptr error;
      try {
        runBody(opName, sig, algorithm, options, body);
      } catch (...) {
        error = std::current_exception();
      }
      executor_->endInline();
      return finishedWork(opName, error);
    }
    return submitCollective(opName, sig, algorithm, options,
                            std::function<void(Comm&)>(std::forward<Body>(body)));
  }
  // Queues point-to-point work: body posts requests and returns them; the
  // Work completes when they are done.
  WorkPtr runPointToPoint(const char* opName, const OpOptions& options,
                          std::function<std::vector<RequestPtr>(Transport&, const OpContext&)> body);

  // Aborts the group from any thread, also while another thread is blocked
  // in an operation on it: that operation and every later one fail with
  // Aborted, and the members are told that this rank aborted the group.
  // Safe to call again. `why` ends the message ("world rank 3 aborted
  // group G (<why>)").
  void abort(const std::string& why);
  // Why the group is broken (a peer loss, a timeout, a mismatch, an
  // abort, here, on a member of this host, or on any member once its
  // notice arrived), or null while it is healthy.
  std::exception_ptr error() const;
  // Where a member's abort learned through the store is recorded (the
  // World's AbortNoticeWatcher sets it).
  const std::shared_ptr<AbortNotice>& abortNotice() const { return abortNotice_; }

  // The group's transport, for the thread driving it (the operation
  // running on the executor, or the inline caller).
  Transport& transport() REQUIRES(executor_->engine()) { return *links_.transport; }

 private:
  OpContext contextFor(const char* opName, uint64_t seq, const OpOptions& options) const;
  WorkPtr submitCollective(const char* opName, const MessageSignature& sig, Algorithm algorithm,
                           const OpOptions& options, std::function<void(Comm&)> body);
  // The Work of an operation that already ended.
  WorkPtr finishedWork(const char* opName, std::exception_ptr error) const;
  // The group's abort state, checked before every operation starts, on
  // every transport: the error this rank's group broke with, a local
  // rank's failure on the abort line of the host's domain, a member's abort
  // whose notice arrived. Atomic loads while the group is healthy; once
  // the group is aborted, no operation issued here can succeed, whatever
  // data already reached this rank.
  void throwIfAborted() const REQUIRES(executor_->engine()) {
    executor_->throwIfBroken();
    if (links_.hostDomain) links_.hostDomain->throwIfAborted();
    abortNotice_->throwIfArrived();
  }
  // Tells every member that this rank's operation failed half-way, which
  // breaks the group. Runs on the executor (or the inline caller).
  void failGroup(const std::exception_ptr& error) REQUIRES(executor_->engine());
  // abort()'s work, with the whole message the operations fail with.
  void abortSaying(const std::string& message);
  // A member's failure, learned from its notice (AbortNotice's listener):
  // raises the abort line of this host's domain with it, and when it is an abort,
  // aborts the group here too, which ends the operation in flight at once,
  // as an abort frame would. Any other failure of a member (a lost peer, a
  // timeout, a mismatch) reaches the operations in flight over TCP through
  // their own waits, as the error of its own type.
  void abortOnNotice(const std::exception_ptr& notice);
  // Makes `error` (as the flight recorder returned it: on the group's first
  // failure it names the dump) the error the group keeps, so every later
  // call raises the very same message. Returns it.
  std::exception_ptr keepFailure(std::exception_ptr error) {
    executor_->recordError(error);
    return error;
  }
  // Runs on the executor (or the inline caller). `issued`: the flight
  // recorder's id of a call that was queued (OpTrace::enqueued).
  template <class Body>
  void runBody(const char* opName, const MessageSignature& sig, Algorithm algorithm,
               const OpOptions& options, Body& body, uint64_t issued = 0)
      REQUIRES(executor_->engine()) {
    OpTrace trace = OpTrace::collective(traced_, issued, opName, sig, collectiveSeq_, links_.route);
    try {
      throwIfAborted();
    } catch (...) {
      std::rethrow_exception(keepFailure(trace.failed(std::current_exception())));
    }
    uint64_t seq = collectiveSeq_++;
    Locality locality{&links_.placement, links_.hostDomain.get(), hostCollectives_, links_.route};
    Comm comm(transport(), contextFor(opName, seq, options), sig, seq, algorithm, scratch_,
              locality);
    try {
      body(comm);
    } catch (const ArgumentsDisagree&) {
      // Every rank found the same disagreement before any data moved: the
      // group is intact, so it is not aborted (but the call is recorded).
      std::rethrow_exception(trace.failed(std::current_exception(), algorithm));
    } catch (...) {
      const std::exception_ptr cause = std::current_exception();
      const std::exception_ptr error = keepFailure(trace.failed(cause, algorithm));
      failGroup(cause);
      std::rethrow_exception(error);
    }
    trace.completed(algorithm);
  }

  GroupConfig config_;
  GroupTransport links_;
  // The collectives of links_.hostDomain's kind (null without a domain).
  const HostCollectives* hostCollectives_ = nullptr;
  TracedGroup traced_;  // how the flight recorder names this group
  const std::shared_ptr<AbortNotice> abortNotice_ = std::make_shared<AbortNotice>();
  // Touched only by the thread running the group's current operation.
  uint64_t collectiveSeq_ GUARDED_BY(executor_->engine()) = 0;
  uint64_t p2pSeq_ GUARDED_BY(executor_->engine()) = 0;
  ScratchArena scratch_ GUARDED_BY(executor_->engine());
  std::unique_ptr<Executor> executor_;
};

}  // namespace meshcomm
