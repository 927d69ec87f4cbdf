"""bench_host_copy.py — host round trips (issue 28; goal: at least 80 % of cupy.asnumpy's bandwidth at 256 MiB):
jitbridge.asarray(numpy_array) and numpy.from_dlpack(tensor, device="cpu") against cupy.asarray / cupy.asnumpy for
the same bytes in the same run, one direction per row and the round trip, with GB/s and the ratio to CuPy.
Needs a GPU and CuPy; exits 0 otherwise. `--mib N` sets the size (default 256)."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import fmt_us, gpu_jitbridge, median_us, print_table  # noqa: E402

import numpy as np  # noqa: E402



def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=256)
    mib = parser.parse_args().mib
    jitbridge, cp = gpu_jitbridge("bench_host_copy", "cupy")
    n = mib * (1 << 20) // 4
    host = np.random.default_rng().standard_normal(n, dtype=np.float32)
    t = jitbridge.asarray(host)
    c = cp.asarray(host)
    # correctness first (the numbers mean nothing otherwise)
    assert np.array_equal(np.from_dlpack(t, device="cpu"), host)
    assert np.array_equal(cp.asnumpy(c), host)
    cp.cuda.Device().synchronize()

    def jb_up():
        jitbridge.asarray(host)

    def cp_up():
        cp.asarray(host)
        cp.cuda.get_current_stream().synchronize()

    def jb_down():
        np.from_dlpack(t, device="cpu")

    def cp_down():
        cp.asnumpy(c)

    def jb_round():
        np.from_dlpack(jitbridge.asarray(host), device="cpu")

    def cp_round():
        cp.asnumpy(cp.asarray(host))

    rows = []
    nbytes = host.nbytes
    for label, jb, ref, copies in (("host to device", jb_up, cp_up, 1), ("device to host", jb_down, cp_down, 1),
                                   ("round trip", jb_round, cp_round, 2)):
        jb()
        ref()  # warm both (pools, page tables)
        us_jb = median_us(jb, repeat=7)
        us_ref = median_us(ref, repeat=7)
        gbs_jb = copies * nbytes / us_jb / 1e3
        gbs_ref = copies * nbytes / us_ref / 1e3
        rows.append([label, fmt_us(us_jb), f"{gbs_jb:.1f} GB/s", fmt_us(us_ref), f"{gbs_ref:.1f} GB/s",
                     f"{gbs_jb / gbs_ref:.0%}"])
    print_table(f"host round trip of {mib} MiB float32: jitbridge.asarray / numpy.from_dlpack(device='cpu') vs "
                "cupy.asarray / cupy.asnumpy (goal: >= 80 % of CuPy's bandwidth)",
                ["copy", "jitbridge", "jitbridge GB/s", "CuPy", "CuPy GB/s", "jitbridge / CuPy"], rows,
                key="host_copy")


if __name__ == "__main__":
    main()
