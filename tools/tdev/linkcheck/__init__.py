"""``tdev link-check``: closure and coverage of a standalone torch_cuda build's shared libraries
against stage 1 and the stock CUDA libraries, by their ELF symbol tables (:mod:`tdev.elf`).

* :mod:`.inputs`: which libraries are read (the build's, stage 1's, the CUDA libraries, the
  providers given) and the data file ``tools/tdev/data/linkcheck.yaml``;
* :mod:`.check`: closure and coverage, a pure function of symbol tables;
* :mod:`.groups`: a missing symbol placed in a source directory (the extraction's files, else
  the prefix rules);
* :mod:`.run`: the whole check from the command's options (``tdev.cli.linkcheck_cmd`` parses
  and renders).
"""
