#include "runtime/Fork.h"

#include <c10/util/Exception.h>
#include <pthread.h>

#include <atomic>

namespace BACKEND_NS {
namespace {

std::atomic<bool> g_used{false};
std::atomic<bool> g_bad_fork{false};

void on_fork_child() {
  if (g_used.load()) g_bad_fork.store(true);
}

const int g_registered = pthread_atfork(nullptr, nullptr, &on_fork_child);

}  // namespace

bool in_bad_fork() { return g_bad_fork.load(std::memory_order_relaxed); }

void check_fork() {
  TORCH_CHECK(!in_bad_fork(), "Cannot re-initialize " BACKEND_DEVICE " in forked subprocess. "
              "To use " BACKEND_DEVICE " with multiprocessing, you must use the 'spawn' start "
              "method");
}

void check_not_forked() {
  check_fork();
  if (!g_used.load(std::memory_order_relaxed)) g_used.store(true);
}

}  // namespace BACKEND_NS
