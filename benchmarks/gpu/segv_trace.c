/* LD_PRELOAD helper for benchmarks/gpu/cudnn_evidence.sh: on a fatal signal, print the native
 * backtrace (library + offset, symbol where exported) to stderr, then die of the same signal.
 * Tells apart a crash inside a CUDA library (cuDNN, cuBLAS) from one in torch's own code. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_fatal(int sig) {
  void *frames[64];
  int n = backtrace(frames, 64);
  static const char head[] = "== native backtrace (segv_trace) ==\n";
  write(2, head, sizeof head - 1);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  void *warm[1];
  backtrace(warm, 1); /* load libgcc_s now, not inside the handler */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fatal;
  sigaction(SIGSEGV, &sa, 0);
  sigaction(SIGBUS, &sa, 0);
  sigaction(SIGFPE, &sa, 0);
}
