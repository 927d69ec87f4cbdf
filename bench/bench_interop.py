"""bench_interop.py — the cost of getting arrays in and out of jitbridge, side by side with what the frameworks
pay for the same exchange in the same run: views of torch tensors (DLPack exchange API; the C++ loop the launcher
uses and the Python call), CuPy/Numba arrays (after the first of their type), a precomputed
__cuda_array_interface__, and allocating an output and handing it to torch.from_dlpack. Prints a table.
Needs a GPU, torch and CuPy (Numba optional); exits 0 with a message otherwise."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _table import fmt_us, median_us, print_table, use_jitbridge  # noqa: E402

import numpy as np  # noqa: E402


def skip(why):
    print(f"bench_interop: skipped ({why})")
    sys.exit(0)


def testing_module():
    """The test-only jitbridge_testing of the build tree (its C++ loops over _core's view_array), or None where it is
    not built (an installed package alone): the C++-loop rows then read n/a."""
    from _table import build_dir
    d = os.path.join(build_dir(), "python_testing")
    if os.path.isdir(d) and d not in sys.path:
        sys.path.append(d)
    try:
        import jitbridge_testing
    except ModuleNotFoundError:
        return None
    return jitbridge_testing


def main():
    try:
        print(f"bench_interop: measuring {use_jitbridge()}")
        import jitbridge
    except ImportError as e:
        skip(str(e))
    info = jitbridge.driver_info()
    if not info["found"] or not info["devices"]:
        skip(f"no GPU: {info['reason'] or 'the driver sees no device'}")
    try:
        import torch
    except ImportError:
        skip("torch is not installed")
    try:
        import cupy as cp
    except ImportError:
        skip("CuPy is not installed")
    if not torch.cuda.is_available():
        skip("torch sees no GPU")
    numba_cuda = None
    try:
        if not hasattr(np, "row_stack"):
            np.row_stack = np.vstack  # numba still names it
        from numba import cuda as numba_cuda
    except Exception:  # noqa: BLE001  (an optional comparison)
        numba_cuda = None

    x = torch.randn(256, 256, device="cuda")
    c = cp.random.standard_normal((256, 256), dtype=cp.float32)
    torch.cuda.synchronize()
    exchange = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
    rows = []
    testing = testing_module()

    def add(what, us, goal=None, note=""):
        rows.append([what, fmt_us(us), fmt_us(goal) if goal else "", note])

    def cpp_loop_us(obj, n, repeat):
        """Microseconds per view in jitbridge_testing's C++ loop (best of `repeat`), None without the module."""
        return None if testing is None else min(testing.bench_view(obj, n) for _ in range(repeat)) / 1000

    # Views of a torch tensor.
    add("view torch tensor, C++ loop (launcher path)", cpp_loop_us(x, 200_000, 7), 0.1,
        "exchange API" if exchange else "no exchange API in this torch: __dlpack__")
    class Fixed:  # a synthetic exchange-API producer that costs nothing: jitbridge's own share
        pass

    if testing is not None:
        Fixed.__dlpack_c_exchange_api__ = testing.exchange_api(fixed=True, stream=0)
    add("  of which jitbridge (synthetic producer), C++ loop", cpp_loop_us(Fixed(), 200_000, 7), 0.1)
    add("jitbridge.as_array(torch tensor)", median_us(lambda: jitbridge.as_array(x), number=20_000),
        None, "Python call + ArrayView object")

    # CAI: a precomputed dict (jitbridge's own parsing cost), then real producers.
    class Iface:
        __cuda_array_interface__ = dict(c.__cuda_array_interface__)

    iface = Iface()
    jitbridge.as_array(iface)  # the first of its type picks the adapter
    add("view CAI object (precomputed dict), C++ loop", cpp_loop_us(iface, 200_000, 5), 1.0,
        "jitbridge's CAI parsing")
    add("jitbridge.as_array(CAI object)", median_us(lambda: jitbridge.as_array(iface), number=20_000), 1.0)
    def framework_rows(name, arr, producer):
        # as_array from Python, the launcher's C++ view, and the framework's own CAI dict for scale.
        jitbridge.as_array(arr)
        add(f"jitbridge.as_array({name} array)", median_us(lambda: jitbridge.as_array(arr), number=5_000), 1.0,
            f"protocol: {testing.adapter_protocol(type(arr))}" if testing is not None else "")
        add(f"  view {name} array, C++ loop", cpp_loop_us(arr, 100_000, 5), None, "the launcher's path")
        add(f"  for comparison: {name}'s __cuda_array_interface__ alone",
            median_us(lambda: arr.__cuda_array_interface__, number=5_000), None, f"{producer} building its dict")

    framework_rows("cupy", c, "CuPy")
    if numba_cuda is not None:
        try:
            framework_rows("numba", numba_cuda.to_device(np.zeros((256, 256), np.float32)), "Numba")
        except Exception as e:  # noqa: BLE001
            add("jitbridge.as_array(numba array)", None, 1.0, f"failed: {e}")

    # Outputs.
    def alloc_and_hand_to_torch():
        torch.from_dlpack(jitbridge.empty((1024,), "float32"))

    alloc_and_hand_to_torch()
    add("jitbridge.empty + torch.from_dlpack", median_us(alloc_and_hand_to_torch, number=5_000), 3.0)
    add("jitbridge.empty alone", median_us(lambda: jitbridge.empty((1024,), "float32"), number=5_000))
    out = jitbridge.empty((1024,), "float32")
    add("  torch.from_dlpack(jitbridge.Tensor) alone", median_us(lambda: torch.from_dlpack(out), number=5_000))
    add("    of which Tensor.__dlpack__(stream=1, max_version=(1, 0))",
        median_us(lambda: out.__dlpack__(stream=1, max_version=(1, 0)), number=5_000))
    add("    of which torch.cuda.current_stream('cuda:0')",
        median_us(lambda: torch.cuda.current_stream("cuda:0"), number=5_000), None, "torch's own Python")
    if exchange:
        add("jitbridge.empty_like(torch tensor) (torch's allocator)",
            median_us(lambda: jitbridge.empty_like(x), number=5_000))

    # The frameworks' own exchanges, same run.
    add("cupy.asarray(torch tensor)", median_us(lambda: cp.asarray(x), number=5_000), None, "comparison")
    add("torch tensor.__dlpack__()", median_us(lambda: x.__dlpack__(), number=5_000), None, "comparison")
    add("torch.from_dlpack(cupy array)", median_us(lambda: torch.from_dlpack(c), number=5_000), None, "comparison")
    torch.cuda.synchronize()

    dev = info["devices"][0]
    print_table(f"jitbridge interop on {dev['name']} (torch {torch.__version__}, CuPy {cp.__version__})",
                ["what", "per call", "goal", "note"], rows, key="interop")


if __name__ == "__main__":
    main()
