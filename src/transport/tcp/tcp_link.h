// The TCP link (transport/link.h): a TcpTransport that reaches every other
// member of the group, on any host.
//
// Thread-safety: as transport/link.h.
#pragma once

#include "transport/link.h"

namespace meshcomm {

// Creates this rank's listener and publishes its address in the group's
// store; connections are made when first needed. Throws Error if no
// listener can be created.
Link setUpTcpLink(const LinkSetup& setup);

}  // namespace meshcomm
