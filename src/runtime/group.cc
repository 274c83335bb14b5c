#include "runtime/group.h"

#include <set>

#include "host/registry.h"
#include "transport/failure.h"

namespace meshcomm {

GroupImpl::GroupImpl(GroupConfig config, GroupTransport transport)
    : config_(std::move(config)),
      links_(std::move(transport)),
      hostCollectives_(links_.hostDomain ? &host::collectivesFor(*links_.hostDomain) : nullptr),
      traced_(config_.traceName, config_.rank, config_.traceRanks),
      executor_(std::make_unique<Executor>(config_.name, *links_.transport)) {
  abortNotice_->listen([this](const std::exception_ptr& notice) { abortOnNotice(notice); });
}

GroupImpl::~GroupImpl() {
  // The notice outlives the group (the World's watcher holds it a moment).
  abortNotice_->listen(nullptr);
  // Operations still queued run to their end first, while the group is
  // whole: their bodies use this group's executor_ (assertDriving,
  // recordError), which reset() would already have set to null. The
  // executor drives the transport, which may use the host's domain, so
  // it goes first.
  executor_->close();
  executor_.reset();
  links_.transport.reset();
  links_.hostDomain.reset();
}

OpContext GroupImpl::contextFor(const char* opName, uint64_t seq, const OpOptions& options) const {
  OpContext ctx;
  ctx.group = config_.name;
  ctx.op = opName;
  ctx.seq = seq;
  auto timeout = options.timeout.count() > 0 ? options.timeout : config_.timeout;
  // Most calls end within their waits' spin and never need the clock.
  ctx.deadline = Deadline::afterFirstUse(timeout);
  return ctx;
}

WorkPtr GroupImpl::submitCollective(const char* opName, const MessageSignature& sig,
                                    Algorithm algorithm, const OpOptions& options,
                                    std::function<void(Comm&)> body) {
  std::string description = std::string(opName) + " on group " + config_.name;
  const uint64_t issued = OpTrace::enqueued(traced_, opName, &sig);
  return executor_->submit(
      std::move(description),
      [this, opName, sig, algorithm, options, issued,
       body = std::move(body)]() mutable -> Executor::Pending {
        executor_->assertDriving();
        runBody(opName, sig, algorithm, options, body, issued);
        return {};
      },
      options.blocking);
}

WorkPtr GroupImpl::finishedWork(const char* opName, std::exception_ptr error) const {
  if (!error) {
    // Immutable once completed, so every successful call can share it. It
    // lives as long as the process and is handed out without a control
    // block (the aliasing constructor over an empty owner): copying and
    // dropping the pointer then costs no atomic reference count.
    static Work* const kDone = [] {
      auto* w = new Work("a completed operation");
      w->complete();
      return w;
    }();
    return WorkPtr(WorkPtr(), kDone);
  }
  auto w = std::make_shared<Work>(std::string(opName) + " on group " + config_.name);
  w->complete(std::move(error));
  return w;
}

void GroupImpl::failGroup(const std::exception_ptr& error) {
  executor_->recordError(error);
  // A failed collective leaves its peers mid-operation: tell the ranks of
  // this host through their domain, the others through the transport (and
  // the store), so every rank fails now.
  if (links_.hostDomain) links_.hostDomain->abort(abortReasonOf(error), errorMessageOf(error));
  transport().abort(error);
}

void GroupImpl::abort(const std::string& why) {
  abortSaying("world rank " + std::to_string(config_.worldRanks[static_cast<size_t>(config_.rank)]) +
              " aborted group " + config_.name + " (" + why + ")");
}

void GroupImpl::abortOnNotice(const std::exception_ptr& notice) {
  const wire::AbortReason reason = abortReasonOf(notice);
  // The ranks of this host may be waiting for this one in their domain,
  // and this rank may now fail its next call at its start: tell them, as an
  // operation failing here would, or they would learn of it only from the
  // store, or as this rank's departure.
  if (links_.hostDomain) links_.hostDomain->abort(reason, errorMessageOf(notice));
  if (reason != wire::AbortReason::kAborted) return;
  abortSaying(errorMessageOf(notice));
}

void GroupImpl::abortSaying(const std::string& message) {
  executor_->abort(message, [this](const std::exception_ptr& error) {
    executor_->assertDriving();
    failGroup(error);
  });
}

std::exception_ptr GroupImpl::error() const {
  if (auto e = executor_->error()) return e;
  // A member of this host that failed raised the segment's abort line.
  if (links_.hostDomain) {
    if (auto e = links_.hostDomain->abortError()) return e;
  }
  return abortNotice_->error();
}

WorkPtr GroupImpl::runPointToPoint(
    const char* opName, const OpOptions& options,
    std::function<std::vector<RequestPtr>(Transport&, const OpContext&)> body) {
  std::string description = std::string(opName) + " on group " + config_.name;
  const uint64_t issued = OpTrace::enqueued(traced_, opName, nullptr);
  return executor_->submit(
      std::move(description),
      [this, opName, options, issued, body = std::move(body)]() -> Executor::Pending {
        executor_->assertDriving();
        OpContext ctx = contextFor(opName, p2pSeq_++, options);
        OpTrace trace = OpTrace::pointToPoint(traced_, issued, opName, ctx.seq);
        try {
          throwIfAborted();
        } catch (...) {
          std::rethrow_exception(keepFailure(trace.failed(std::current_exception())));
        }
        std::vector<RequestPtr> requests;
        try {
          requests = body(transport(), ctx);
        } catch (...) {
          std::rethrow_exception(trace.failed(std::current_exception()));
        }
        trace.posted(requests, links_.placement, links_.hostDomain != nullptr, config_.rank);
        // A blocking call finishes its transfers here; an asynchronous one
        // leaves them to background progress, under the same deadline.
        if (options.blocking) {
          try {
            transport().wait(requests, ctx);
          } catch (...) {
            const std::exception_ptr cause = std::current_exception();
            const std::exception_ptr error = keepFailure(trace.failed(cause));
            failGroup(cause);
            std::rethrow_exception(error);
          }
          trace.completed();
          // Done: the executor completes the Work, naming a receive's source.
          return {std::move(requests), ctx.deadline, {}, {}};
        }
        // Name the peers, as the blocking path's timeout does.
        std::set<int> peers;
        for (const auto& r : requests) peers.insert(r->peer);
        std::string during = ctx.describe() + " with";
        for (int peer : peers) {
          during += peer == *peers.begin() ? " " : ", ";
          during += peer == kAnyPeer ? std::string("any rank")
                                     : "rank " + std::to_string(peer) + " (world rank " +
                                           std::to_string(config_.worldRanks[static_cast<size_t>(peer)]) + ")";
        }
        return {std::move(requests), ctx.deadline, std::move(during),
                [trace](const std::exception_ptr& error) mutable {
                  if (error) {
                    trace.failed(error);
                  } else {
                    trace.completed();
                  }
                }};
      },
      options.blocking);
}

}  // namespace meshcomm
