// Point-to-point: user sends and receives, matched by peer and tag in
// issue order. Their tags are the users' own, apart from every collective's
// (transport/tags.h); they carry dtype and element count so mismatched
// pairs fail with Mismatch.
#pragma once

#include <vector>

#include "meshcomm/types.h"
#include "transport/transport.h"

namespace meshcomm {

// Posts every operation at once and returns their requests; they progress
// together, so no listing order can deadlock.
std::vector<RequestPtr> postPointToPoint(Transport& transport, const std::vector<P2POp>& ops);

// Posts a receive of the first message with `tag` from any peer; the
// request's peer names the sender once it is done.
RequestPtr postReceiveFromAny(Transport& transport, TensorRef tensor, int tag);

}  // namespace meshcomm
