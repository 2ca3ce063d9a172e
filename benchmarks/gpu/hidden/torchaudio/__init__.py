# See ../triton/__init__.py.
raise ImportError("no torchaudio built for torch 2.6.0 on this machine")
