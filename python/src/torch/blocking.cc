#include "blocking.h"

namespace meshcomm::torch_native {

bool pythonSignalRaised(void* raised) {
  PyGILState_STATE state = PyGILState_Ensure();
  const bool now = PyErr_CheckSignals() != 0;
  PyGILState_Release(state);
  if (now) *static_cast<bool*>(raised) = true;
  return now;
}

}  // namespace meshcomm::torch_native
