"""The standalone torch_cuda build: the two-stage build of a ``tdev extract`` output.

``tdev build`` and ``wrapped-cmake build|install|clean --backend cuda --source <extraction>``
reach this package through :mod:`tdev.cli.build_cmd` (its ``SOURCE`` is registered under the
entry point group ``wrapped_cmake.sources``; wrapped_cmake, the generic CMake wrapper, imports
nothing from tdev). Modules:

* :mod:`.inputs`: what a build reads (the manifest through ``tdev.extract.manifest``, the
  PyTorch tree, the overlay, the patch series, the target sets);
* :mod:`.stage`: the staged sources of both stages, with the patches applied;
* :mod:`.targets`: the target sets of the overlay's ``targets.yaml``;
* :mod:`.driver`: the build, one stage-2 driver for both stage-1 modes (:mod:`.mode`):
  :mod:`.from_source` (c10 built from the PyTorch tree) and :mod:`.from_torch` (the installed
  torch; codegen for the ATen sets);
* :mod:`.wheel`, :mod:`.torchmode`, :mod:`.cudalibs`: the installed torch as stage 1, its
  settings and CUDA libraries; :mod:`.codegen` (torchgen), :mod:`.opunits` (the op list's units),
  :mod:`.cudac` (the real ``_CUDAC``);
* :mod:`.estimate`: ``--plan`` (units and a time estimate).
"""
