# Packages the device machine has for its own torch release, which torch 2.6.0 cannot use (triton
# 3.2.0 is 2.6.0's pin; torchvision and torchaudio are built against another torch's operators).
# cuda_tests.sh puts this folder first on PYTHONPATH, so torch 2.6.0 and its tests see them as
# not installed (as on a machine without them) and skip what needs them.
raise ImportError("triton 3.2.0 (torch 2.6.0's pin) is not on this machine")
