"""make_seeds.py — writes the seed inputs of the cache_entry target (tests/fuzz/seeds/cache_entry): intact entry
payloads in the entry format (written here from its description in jit/src/cache_entry.cpp, not by jitbridge),
and two regressions (dependencies naming /dev/zero and a FIFO). Run it again when the format changes."""
import os
import struct

KEY = b"0123456789abcdef0123456789abcdef"
HERE = os.path.dirname(os.path.abspath(__file__))


def u64(v):
    return struct.pack("<Q", v % 2**64)


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return u64(len(b)) + b


def payload(deps=(), kernels=(), recorded=1_700_000_000_000_000_000, cwd=b"", options=(), lowered=(),
            link_input=b"", ltoir=False, linked=False, templates=()):
    out = s(KEY) + u64(recorded) + s(cwd) + u64(len(deps))
    for path, size, mtime, digest in deps:
        out += s(path) + u64(size) + u64(mtime) + s(digest)
    out += s("sm_90") + s(b"\x7fELF fake cubin") + s("") + s("warning: none")
    out += u64(len(options)) + b"".join(s(o) for o in options)
    out += u64(len(lowered)) + b"".join(s(a) + s(b) for a, b in lowered)
    out += u64(len(kernels))
    for name, params in kernels:
        out += s(name) + s(name) + b"".join(u64(v) for v in (1, 32, 0, 0, 0, 372, 0, 0))
        if params is None:
            out += u64(0)
            continue
        out += u64(1) + u64(len(params))
        for param in params:
            pointer, typ, const, size, align, spelling = param[:6]
            pointee_size, pointee_align = param[6:] or (0, 0)
            out += u64(pointer) + s(typ) + u64(const) + u64(size) + u64(align) + s(spelling)
            out += u64(pointee_size) + u64(pointee_align)
    out += s(link_input) + u64(ltoir) + u64(linked)
    out += u64(len(templates)) + b"".join(s(a) + s(b) for a, b in templates)
    return out


SAXPY = [(1, "float", 1, 8, 8, "float const*", 4, 4), (1, "float", 0, 8, 8, "float*", 4, 4), (0, "int", 0, 4, 4, "int")]
SEEDS = {
    "empty-program": payload(),
    "saxpy": payload(kernels=[("saxpy", [(0, "float", 0, 4, 4, "float")] + SAXPY)], options=["-arch=sm_90"]),
    "template": payload(kernels=[("fill<float>", [(1, "float", 0, 8, 8, "float*")])],
                        lowered=[("fill<float>", "_Z4fillIfEvPT_")],
                        templates=[("fill", "template <typename T>")]),
    "no-signature": payload(kernels=[("k", None)]),
    "vector-pointee": payload(kernels=[("k", [(1, "float4", 0, 8, 8, "float4*", 16, 16), (1, "void", 1, 8, 8, "void const*")])]),
    "damaged-sizes": payload(kernels=[("k", [(0, "Params", 0, 2**64 - 1, 2**63, "Params")])]),
    "negative-time": payload(recorded=2**63),
    "dependency": payload(deps=[("/usr/include/stdio.h", 1, 1, "0" * 32)]),
    "cwd": payload(cwd="/nonexistent"),
    "linked": payload(kernels=[("k", None)], link_input=b"\x7fELF fake relocatable", linked=True),
    "ltoir-unlinked": payload(link_input=b"\xedCN\x7f fake LTO-IR", ltoir=True),
}
# Entries whose dependency check must not block or read without bound (found by fuzzing; kept as regressions).
REGRESSIONS = {
    "dependency-dev-zero-read-without-bound": payload(deps=[("/dev/zero", 0, 5, "0" * 32)], recorded=2**62),
    "dependency-fifo-blocks": payload(deps=[("/tmp/jbfuzz.fifo", 0, 5, "0" * 32)], recorded=2**62),
}
# The first byte frames the input (fuzz_cache_entry.cpp): 0x01 = an intact header for the rest, a regular file;
# 0x11 / 0x15 / 0x19 / 0x1d = the same as a symlink, a symlink to /dev/zero, a FIFO, a directory.
if __name__ == "__main__":
    folder = os.path.join(HERE, "seeds", "cache_entry")
    os.makedirs(folder, exist_ok=True)
    for name, p in SEEDS.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(b"\x01" + p)
    folder = os.path.join(HERE, "regressions", "cache_entry")
    os.makedirs(folder, exist_ok=True)
    for name, p in REGRESSIONS.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(b"\x01" + p)
    folder = os.path.join(HERE, "seeds", "cache_entry")
    for frame, name in ((0x11, "as-symlink"), (0x15, "symlink-to-dev-zero"), (0x19, "fifo"), (0x1D, "directory"),
                        (0x00, "raw-bytes")):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(bytes([frame]) + SEEDS["saxpy"])
