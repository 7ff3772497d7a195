// Broadcast: one call of a function on every worker of a pool (blz_broadcast).
#pragma once

#include "blitz.h"

namespace blz {

class Registry;

// Posts one job into each worker's mailbox (Worker::post_mail) and waits
// until all of them ran. The caller, if it is one of the pool's workers,
// runs its own job while it waits: its wait looks at its mailbox.
blz_status broadcast(Registry &registry, blz_thread_fn fn, void *arg);

}  // namespace blz
