#include "common/interrupt.h"

#include "meshcomm/error.h"
#include "meshcomm/interrupt.h"

namespace meshcomm {
namespace {

struct ThreadCheck {
  InterruptCheck check = nullptr;
  void* context = nullptr;
  std::chrono::steady_clock::time_point nextDue{};
};

thread_local ThreadCheck tCheck;
thread_local AbortToken* tAbortToken = nullptr;

}  // namespace

ScopedInterruptCheck::ScopedInterruptCheck(InterruptCheck check, void* context)
    : previousCheck_(tCheck.check), previousContext_(tCheck.context) {
  tCheck.check = check;
  tCheck.context = context;
  tCheck.nextDue = {};
}

ScopedInterruptCheck::~ScopedInterruptCheck() {
  tCheck.check = previousCheck_;
  tCheck.context = previousContext_;
}

bool interruptCheckInstalled() { return tCheck.check != nullptr; }

bool AbortToken::raise(std::string message) {
  int expected = kIdle;
  if (!state_.compare_exchange_strong(expected, kWriting, std::memory_order_acq_rel)) return false;
  message_ = std::move(message);
  state_.store(kRaised, std::memory_order_release);
  return true;
}

AbortToken* setThreadAbortToken(AbortToken* token) {
  AbortToken* previous = tAbortToken;
  tAbortToken = token;
  return previous;
}

bool interruptRequested(bool signalled) {
  if (tAbortToken != nullptr && tAbortToken->raised()) return true;
  if (tCheck.check == nullptr) return false;
  auto now = std::chrono::steady_clock::now();
  if (!signalled && now < tCheck.nextDue) return false;
  tCheck.nextDue = now + kInterruptPollInterval;
  return tCheck.check(tCheck.context);
}

void throwInterrupted(const std::string& during, const std::string& rank) {
  if (tAbortToken != nullptr && tAbortToken->raised()) {
    throw Aborted(during + ": " + tAbortToken->message());
  }
  std::string message = during;
  message += " was interrupted on ";
  message += rank;
  message += " and abandoned; the group is aborted on every rank (create a new one to continue)";
  throw Interrupted(message);
}

}  // namespace meshcomm
