"""Synthetic array producers the CPU array tests share: __dlpack__ producers of prepared capsules (DLPack 1.x and
legacy) and objects exporting a given __cuda_array_interface__ dict."""


class Producer:
    """A __dlpack__ producer returning a prepared capsule; records how it was called."""

    def __init__(self, capsule, device=(1, 0)):
        self.capsule = capsule
        self.device = device
        self.calls = []

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append({"stream": stream, "max_version": max_version})
        return self.capsule

    def __dlpack_device__(self):
        return self.device


class LegacyProducer(Producer):
    """A producer from before DLPack 1.0: no max_version keyword."""

    def __dlpack__(self, stream=None):
        self.calls.append({"stream": stream})
        return self.capsule


class CAI:
    """An object exporting a given __cuda_array_interface__ dict (a property on the type)."""

    def __init__(self, iface):
        self.iface = iface

    @property
    def __cuda_array_interface__(self):
        return self.iface


def cai(**fields):
    d = {"shape": (4, 3), "typestr": "<f4", "data": (0x10000, False), "version": 3}
    d.update(fields)
    return CAI({k: v for k, v in d.items() if v is not ...})
