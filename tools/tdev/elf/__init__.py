"""ELF files read without trusting them: :mod:`.header` checks the structure (header, program
and section tables) before :mod:`.symbols` reads the symbol tables with ``readelf`` and writes or
reads symbol dumps. Used by the link check and by the stage-1 description of the build."""
