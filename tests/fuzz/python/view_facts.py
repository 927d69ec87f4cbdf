"""view_facts.py — compares a jitbridge.ArrayView with the reference's facts, and checks that what it exports
(__cuda_array_interface__, __dlpack__ versioned and legacy) reads back as the same view."""
import jitbridge

from fuzz_common import finding, refused_ok


def differences(v, facts):
    """The first difference between view `v` and `facts` (a reference Accept's facts), or None."""
    for name in ("ptr", "shape", "strides", "size", "nbytes", "dtype", "device", "readonly", "itemsize", "stream"):
        if name in facts and getattr(v, name) != facts[name]:
            return f"{name} is {getattr(v, name)!r}, the reference says {facts[name]!r}"
    if v.ndim != len(facts["shape"]):
        return f"ndim is {v.ndim}"
    return None


# The dtypes a __cuda_array_interface__ typestr names unambiguously (fp8 exports as '|V1', raw bytes).
CAI_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
              "float64", "complex64", "complex128", "bfloat16"}


class _CAI:
    def __init__(self, d):
        self.d = d

    @property
    def __cuda_array_interface__(self):
        return self.d


class _DLPack:
    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def _same(a, b, device=True):
    """The same view: strides compared where they matter (extents above 1, non-empty views). A CAI dict names no
    device (the driver says, from the address: cuda:0 on this one-GPU machine), so device=False for those."""
    if (a.ptr, a.shape, a.dtype) != (b.ptr, b.shape, b.dtype) or device and a.device != b.device:
        return False
    return a.size == 0 or all(n <= 1 or x == y for n, x, y in zip(a.shape, a.strides, b.strides))


def round_trips(v, context):
    """An accepted view must be accepted again through each export, as the same view. (Views on a CUDA device this
    one-GPU machine lacks are left out: exporting one orders streams on that device, which may be refused.)"""
    if v.device.startswith(("cuda:", "cuda_managed:")) and not v.device.endswith(":0"):
        return
    try:
        again = jitbridge.as_array(v)
        if not _same(again, v):
            finding("wrong-result", f"as_array(view) differs from the view | {context}")
        if v.device.startswith(("cuda:", "cuda_managed:")) and v.dtype in CAI_DTYPES:  # fp8 exports as raw bytes
            d = v.__cuda_array_interface__
            back = jitbridge.as_array(_CAI(d))
            if not _same(back, v, device=False) or back.readonly != v.readonly:
                finding("wrong-result", f"the view's __cuda_array_interface__ {d} reads back differently | {context}")
        for max_version in ((1, 0), None):
            cap = v.__dlpack__(max_version=max_version)
            back = jitbridge.as_array(_DLPack(cap, v.__dlpack_device__()))
            if not _same(back, v):
                finding("wrong-result", f"the view's __dlpack__(max_version={max_version}) reads back differently | {context}")
        repr(v)
    except BaseException as e:  # noqa: BLE001 - every exception is judged
        if isinstance(e, jitbridge.NoDriverError):
            return
        if refused_ok(e, "exporting an accepted view | " + context) == "refused":
            finding("wrong-refusal", f"an export of an accepted view was refused: {type(e).__name__}: {e} | {context}")
        raise
