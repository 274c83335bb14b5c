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

bool interruptRequested(bool signalled) {
  if (tCheck.check == nullptr) return false;
  auto now = std::chrono::steady_clock::now();
  if (!signalled && now < tCheck.nextDue) return false;
  tCheck.nextDue = now + kInterruptPollInterval;
  return tCheck.check(tCheck.context);
}

void throwInterrupted(const std::string& during, const std::string& rank) {
  std::string message = during;
  message += " was interrupted on ";
  message += rank;
  message += " and abandoned; the group is aborted on every rank (create a new one to continue)";
  throw Interrupted(message);
}

}  // namespace meshcomm
