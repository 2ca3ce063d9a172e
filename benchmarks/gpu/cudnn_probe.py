"""Each operator of torch's own autocast lists, one by one, in float16 and bfloat16 autocast on
CUDA: which raise. Run under two torches on one machine (the runtime under test and the
machine's own) to tell a cuDNN-version failure from a defect of a build.

    python cudnn_probe.py
"""
from __future__ import annotations

import torch
from torch.testing._internal.autocast_test_lists import AutocastTestLists


def main() -> int:
    print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn",
          torch.backends.cudnn.version(), "from", torch.__file__)
    lists = AutocastTestLists(torch.device("cuda"))
    failed = 0
    for dtype in (torch.float16, torch.bfloat16):
        for entry in lists.torch_fp16:
            op, args = entry[0], entry[1]
            try:
                with torch.autocast("cuda", dtype=dtype):
                    out = getattr(torch, op)(*args)
                torch.cuda.synchronize()
                ok = "ok " + str(getattr(out, "dtype", type(out).__name__))
            except Exception as e:  # noqa: BLE001 - the point is to see every failure
                failed += 1
                ok = f"RAISES {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            print(f"{str(dtype)[6:]:9} {op:32} {ok}")
    print(f"{failed} raised")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
