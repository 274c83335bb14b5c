#include "transport/routed_transport.h"

#include <set>

#include "common/check.h"
#include "common/interrupt.h"
#include "meshcomm/error.h"

namespace meshcomm {

RoutedTransport::RoutedTransport(std::unique_ptr<Transport> network,
                                 std::unique_ptr<ShmTransport> local)
    : network_(std::move(network)), local_(std::move(local)) {
  MESHCOMM_CHECK(network_->rank() == local_->rank() && network_->size() == local_->size());
}

RequestPtr RoutedTransport::postSend(int peer, uint64_t tag, const MessageSignature& sig,
                                     const void* data, size_t bytes) {
  throwIfBroken();
  return route(peer).postSend(peer, tag, sig, data, bytes);
}

RequestPtr RoutedTransport::postRecv(int peer, uint64_t tag, const MessageSignature& sig,
                                     void* data, size_t bytes) {
  throwIfBroken();
  return route(peer).postRecv(peer, tag, sig, data, bytes);
}

void RoutedTransport::throwIfBroken() const {
  if (auto broken = brokenError()) std::rethrow_exception(broken);
}

void RoutedTransport::wait(std::span<const RequestPtr> requests, const OpContext& ctx) {
  throwIfBroken();
  bool anyLocal = false;
  bool anyRemote = false;
  for (const auto& r : requests) (local_->reaches(r->peer) ? anyLocal : anyRemote) = true;
  if (!anyRemote) return local_->wait(requests, ctx);
  if (!anyLocal) return network_->wait(requests, ctx);

  const std::string during = ctx.describe();
  auto allDone = [&] {
    for (const auto& r : requests) {
      if (!r->done()) return false;
    }
    return true;
  };
  try {
    while (!allDone()) {
      bool moved = local_->poll(during);
      // Block on the sockets only while shared memory is idle.
      network_->progress(std::chrono::milliseconds(moved ? 0 : 1), -1);
      throwIfBroken();
      if (allDone()) break;
      if (interruptRequested(false)) throwInterrupted(during, "rank " + std::to_string(rank()));
      if (ctx.deadline.expired()) {
        std::set<std::string> waitingOn;
        for (const auto& r : requests) {
          if (!r->done()) {
            waitingOn.insert("rank " + std::to_string(r->peer) +
                             (r->isSend ? " to receive" : " to send"));
          }
        }
        std::string peers;
        for (const auto& w : waitingOn) peers += (peers.empty() ? "" : ", ") + w;
        throw Timeout(during + " timed out; still waiting for " + peers +
                      ". A rank that never issued this operation, or issued a different one, "
                      "is the usual cause (the group timeout can be raised with "
                      "MESHCOMM_TIMEOUT_MS)");
      }
    }
  } catch (...) {
    abort(std::current_exception());
    throw;
  }
}

void RoutedTransport::progress(std::chrono::milliseconds budget, int interruptFd) {
  const bool local = local_->hasPending();
  const bool remote = network_->hasPending();
  if (!remote) return local_->progress(budget, interruptFd);
  if (!local) return network_->progress(budget, interruptFd);
  const auto until = Deadline::Clock::now() + budget;
  while (Deadline::Clock::now() < until && !brokenError()) {
    local_->progress(std::chrono::milliseconds(0), interruptFd);
    network_->progress(std::chrono::milliseconds(1), interruptFd);
    if (!local_->hasPending() || !network_->hasPending()) return;
  }
}

bool RoutedTransport::hasPending() const { return local_->hasPending() || network_->hasPending(); }

void RoutedTransport::abort(std::exception_ptr error) {
  local_->abort(error);
  network_->abort(error);
}

std::exception_ptr RoutedTransport::brokenError() const {
  if (auto e = network_->brokenError()) return e;
  return local_->brokenError();
}

}  // namespace meshcomm
