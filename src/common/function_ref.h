// FunctionRef: a non-owning reference to a callable, for callbacks that run
// before the call taking them returns. Unlike std::function it never
// allocates, so it suits the per-call paths whose latency matters.
//
// Thread-safety: as the referenced callable.
#pragma once

#include <type_traits>
#include <utility>

namespace meshcomm {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  // `f` must outlive every call through this reference.
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): passed where a callback is taken
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace meshcomm
