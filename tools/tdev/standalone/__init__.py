"""tdev's build stage: the standalone two-stage build of a ``tdev extract`` output.

``wrapped-cmake build|install|clean --backend cuda --source <extraction>`` reaches this package
through the entry point group ``wrapped_cmake.sources`` (:data:`tdev.build.cli.SOURCE`):
wrapped_cmake, the generic CMake wrapper, imports nothing from tdev. Modules:

* :mod:`.inputs`: what a build reads (the manifest through ``tdev.extract.manifest``, the
  PyTorch tree, the overlay, the patch series, the target sets);
* :mod:`.stage`: the staged sources of both stages, with the patches applied;
* :mod:`.targets`: the target sets of the overlay's ``targets.yaml``;
* :mod:`.standalone`: stage 1 (c10) and stage 2 (c10_cuda, ``_CUDAC``) as wrapped-cmake builds;
* :mod:`.estimate`: ``--plan`` (units and a time estimate);
* :mod:`.cli`: the source builder wrapped-cmake calls.
"""
