"""tdev.patch: apply, verify, record and port the transitional patches to PyTorch.

The library behind `tdev patch` (docs/patches.md). Entry points return typed results:
``ops.check`` (verify/status), ``ops.apply``, ``ops.unapply`` -> SeriesReport;
``record.new``, ``record.refresh`` -> RecordResult; ``merge.port`` -> PortReport.
Bad input raises ``diff.PatchFormatError`` ('FILE: problem'); a busy tree ``tree.LockBusy``.
"""
