#!/bin/bash
# Dump, into $OUT, the symbol tables of what provides symbols on the machine that built the
# libraries but not on the one that checks them: the driver's libcuda.so.1 (libcaffe2_nvrtc's),
# the C library and libm (a newer glibc's symbol versions: __isoc23_strtol@GLIBC_2.38, ...)
# and the Python interpreter (the C API an extension module such as _CUDAC imports: libpython
# when the interpreter is built shared, else the executable, which exports it). Checked there
# with `tdev link-check --libs ... --provider A.syms.gz,B.syms.gz,...`. Run from the repository root.
set -u
dump() { [ -n "$1" ] && [ -f "$1" ] && PYTHONPATH=tools:. python3 -m tdev link-check --dump-symbols "$1" -o "$OUT/$2.syms.gz"; }
for L in libcuda.so.1 libc.so.6 libm.so.6; do
  dump "$(ldconfig -p | sed -n "s/^[[:space:]]*$L (libc6,x86-64[^)]*) => //p" | head -1)" $L
done
PY=$(PYTHONPATH=tools:. python3 -c 'import sys; from tdev.linkcheck.inputs import interpreter_library as i; print(i(sys.executable))')
dump "$PY" "python$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
