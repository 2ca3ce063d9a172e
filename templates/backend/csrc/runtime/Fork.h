// Fork safety: the device's runtime (its threads, locks and driver state) does not survive
// fork(). A child forked after its parent used the device gets one clear error at every entry
// point that would touch the device, as CUDA's "Cannot re-initialize CUDA in forked subprocess",
// instead of waiting forever for threads that exist only in the parent. Counting devices is not
// a use. No torch headers here: the CPython binding and the HAL include it.
#pragma once

#include "runtime/Config.h"

namespace BACKEND_NS {

// whether this process is such a child
bool in_bad_fork();
// throws (c10::Error) in such a child; otherwise notes that this process uses the device
void check_not_forked();
// throws in such a child, without noting a use (init(), _lazy_init())
void check_fork();

}  // namespace BACKEND_NS
