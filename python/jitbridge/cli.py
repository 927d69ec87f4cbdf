"""jitbridge's command line: compile a .cu file and show its kernels, manage the kernel cache, check the setup.

    python -m jitbridge compile FILE.cu [--arch sm_90 | --arch sm_80,sm_90 -o x.fatbin] [-D NAME[=VALUE]] [-I DIR]
                                [--name-expression EXPR] [--option OPT] [--ptx]
    python -m jitbridge cache info | cache clear
    python -m jitbridge doctor [--json]
    python -m jitbridge torch build

Mistakes (a missing file, a bad option, source that does not compile) print one
``jitbridge: error: ...`` line (a compile error adds its diagnostic) and exit with status 1;
command-line usage errors exit with status 2.
"""

import argparse
import json
import os
import sys
import warnings

import jitbridge
from jitbridge import _core

from ._argv import join_option_values

_ORIGIN = {"compiled": "compiled", "memory": "from memory cache", "disk": "from disk cache"}


class UserError(Exception):
    """A mistake of the user's: reported as one line, without a traceback."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"jitbridge: error: {message} (see '{self.prog} --help')\n")


def _human_bytes(n):
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"


def _plural(n, word, plural=None):
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


def _size(n):
    """'512 bytes', '17912 bytes (17.5 KiB)'."""
    return f"{n} bytes" if n < 1024 else f"{n} bytes ({_human_bytes(n)})"


def _kernel_line(kernel):
    signature = str(kernel.signature) if kernel.signature is not None else "(?)"
    r = kernel.resources
    if r.known:
        res = (f"regs={r.registers} smem={r.shared_bytes} lmem={r.local_bytes} cmem={r.const_bytes} "
               f"spills={r.spill_store_bytes}/{r.spill_load_bytes}")
    else:
        res = "resources unknown (PTX only)"
    line = f"  {kernel.name}{signature}  {res}"
    if kernel.lowered_name != kernel.name:
        line += f"  [{kernel.lowered_name}]"
    return line


def _cmd_compile(args):
    path = args.file
    try:
        with open(path, "rb") as f:
            code = f.read()
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}") from None
    for define in args.define:
        if not define or define.startswith("="):
            raise UserError(f"-D {define!r}: expected NAME or NAME=VALUE")
    if not code.strip():
        raise UserError(f"{path} is empty: nothing to compile")
    for directory in args.include:
        if not os.path.isdir(directory):
            why = "a file, not a directory" if os.path.exists(directory) else "no such directory"
            raise UserError(f"-I {directory}: {why}")
    options = [f"-D{d}" for d in args.define] + list(args.option)
    # Quoted includes resolve against the file's own directory first, as with any compiler.
    include_paths = [os.path.dirname(os.path.abspath(path))] + list(args.include)
    program_name = os.path.basename(path)
    try:
        # --arch sm_80,sm_90: a fat binary with one image per target.
        arch = args.arch.split(",") if args.arch and "," in args.arch else args.arch
        with warnings.catch_warnings():  # NVRTC's warnings: the log is printed below
            warnings.simplefilter("ignore", jitbridge.CompileWarning)
            program = jitbridge.compile(code, options=options, name_expressions=args.name_expression,
                                        include_paths=include_paths, arch=arch, ptx=args.ptx,
                                        program_name=program_name)
    except ValueError as e:  # a malformed or unsupported arch, a bad option value
        raise UserError(str(e)) from None
    if program.log:
        print(program.log, file=sys.stderr)
    kernels = program.kernels
    if not kernels:
        hints = [f"\n  '{name}' is a template kernel ({header}): compile an instance with "
                 f"--name-expression '{example}'" for name, header, example in program.templates]
        what = "only template kernels, none instantiated" if hints else "no __global__ function"
        raise UserError(f"{path} has no kernels ({what}){''.join(hints)}")
    print(f"{program_name}: {_plural(len(kernels), 'kernel')} for {program.arch} "
          f"({_ORIGIN.get(program.origin, program.origin)})")
    for kernel in kernels:
        print(_kernel_line(kernel))
    if args.ptx:
        print()
        print(program.ptx, end="" if program.ptx.endswith("\n") else "\n")
    if args.output:
        image = program.fatbin or program.cubin or program.ptx.encode()
        try:
            with open(args.output, "wb") as f:
                f.write(image)
        except OSError as e:
            raise UserError(f"cannot write {args.output}: {e.strerror or e}") from None
        print(f"wrote {args.output}: {_size(len(image))}")
    return 0


def _cache_info():
    """cache_info() without its warning: the caller prints disk_reason itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return jitbridge.cache_info()


def _disk_state(info):
    """'on', 'on (shared with group G)' or 'off: <why>'."""
    if not info["disk"]:
        return f"off: {info['disk_reason']}" if info.get("disk_reason") else "off"
    return f"on (shared with group {info['trust_group']})" if info.get("trust_group") else "on"


def _cmd_cache_info(args):
    info = _cache_info()
    print(f"directory: {info['directory'] or '(none)'}")
    print(f"disk:      {_disk_state(info)}")
    print(f"entries:   {info['entries']}")
    print(f"size:      {_size(info['bytes'])}")
    return 0


def _cmd_cache_clear(args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the reason is printed below
        removed = jitbridge.cache_clear()
    info = _cache_info()
    print(f"removed {_plural(removed, 'entry', 'entries')} from {info['directory'] or '(no directory)'}")
    if not info["disk"] and info.get("disk_reason"):
        print(f"disk:    {_disk_state(info)} (nothing there was touched)")
    return 0


def _driver_version(v):
    return f"{v // 1000}.{(v % 1000) // 10}"


_COMPONENTS = (("nvrtc", "NVRTC"), ("nvjitlink", "nvJitLink"), ("device_runtime", "cudadevrt"),
               ("cuda_headers", "CUDA headers"),
               ("cccl_headers", "CCCL headers"), ("libcuda", "libcuda"))
# What compiling needs; nvJitLink, the device runtime (libcudadevrt.a, for dynamic parallelism) and the
# driver are reported but do not make the setup unusable here.
_NEEDED = {"nvrtc": "NVRTC was not found", "cuda_headers": "the CUDA headers (cuda_fp16.h) were not found",
           "cccl_headers": "the CCCL headers (cuda/std, cub) were not found"}


def _cuda_search():
    """_core._cuda_search(), or a stand-in saying why it failed: doctor reports, it never crashes."""
    try:
        return _core._cuda_search()
    except Exception as e:  # noqa: BLE001 - whatever went wrong is the report
        broken = {"found": False, "path": None, "rule": None, "version": None, "note": None,
                  "error": f"the search failed: {type(e).__name__}: {e}", "tried": []}
        return {"wheel_roots": [], "include_dirs": [], **{key: dict(broken) for key, _ in _COMPONENTS}}


def _component_lines(pick):
    """The doctor's text for one component: the first line, then indented details."""
    if pick["found"]:
        version = f"{pick['version']}, " if pick["version"] else ""
        lines = [f"{pick['path']} ({version}from {pick['rule']})"]
        if pick["note"]:
            lines.append(f"  {pick['note']}")
    else:
        lines = [f"not found: {pick['error']}" if pick["error"] else "not found"]
    for step in pick["tried"]:
        where = f" {step['path']}" if step["path"] and step["path"] != step["rule"] else ""
        lines.append(f"  {'tried' if pick['found'] else 'searched'} {step['rule']}{where}: {step['why']}")
    return lines


def _doctor_report():
    """Everything doctor shows, as one JSON-ready dict; 'problems' lists what keeps compiling from working."""
    report = {"jitbridge": {"version": jitbridge.__version__,
                            "path": os.path.dirname(os.path.abspath(jitbridge.__file__))},
              "python": {"version": sys.version.split()[0], "executable": sys.executable}}
    report["cuda"] = _cuda_search()
    problems = [why for key, why in _NEEDED.items() if not report["cuda"][key]["found"]]
    try:
        info = jitbridge.driver_info()
    except Exception as e:  # noqa: BLE001 - a driver that fails while asked is reported
        info = {"found": True, "reason": f"found, but it failed: {e}", "version": None, "devices": []}
    report["driver"] = info
    try:
        arch = jitbridge.default_arch()
    except Exception as e:  # noqa: BLE001
        arch = f"unknown ({e})"
    if info["devices"]:
        why = "the current GPU's"
    elif os.environ.get("JITBRIDGE_ARCH"):
        why = "from JITBRIDGE_ARCH"
    else:
        why = "built-in default; set JITBRIDGE_ARCH to change"
    report["default_arch"] = {"arch": arch, "why": why}
    try:
        report["cache"] = _cache_info()
    except Exception as e:  # noqa: BLE001
        report["cache"] = {"directory": None, "disk": False, "entries": 0, "bytes": 0, "error": str(e)}
    from .torch import addon
    report["torch_native"] = addon.status()
    report["usable"] = not problems
    report["problems"] = problems
    return report


def _torch_native_line(native):
    """doctor's line for the torch add-on (jitbridge.torch's native runner)."""
    if native["mode"] == "off":
        return "off (JITBRIDGE_TORCH_NATIVE=0): ops use the Python runner"
    if native["reason"]:
        return f"unavailable: {native['reason']}"
    state = "built" if native["built"] else "not built yet (built at first use, or: python -m jitbridge torch build)"
    return f"{state}: {native['path']}; torch {native['torch']}, {native['compiler']}"


def _cmd_doctor(args):
    report = _doctor_report()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if report["usable"] else 1
    rows = [("jitbridge", f"{report['jitbridge']['version']} ({report['jitbridge']['path']})"),
            ("python", f"{report['python']['version']} ({report['python']['executable']})")]
    cuda = report["cuda"]
    rows.append(("nvidia wheels", ", ".join(cuda["wheel_roots"]) or "none in sys.path (no nvidia/cu13 directory)"))
    for key, label in _COMPONENTS:
        lines = _component_lines(cuda[key])
        rows.append((label, lines[0]))
        rows.extend(("", line) for line in lines[1:])
    rows.append(("include dirs", " ".join(cuda["include_dirs"]) or "none"))
    info = report["driver"]
    gpus = info["devices"]
    if info["found"] and info["version"] is not None:
        rows.append(("driver", f"CUDA {_driver_version(info['version'])} ({info['version']})"))
    elif info["found"]:
        rows.append(("driver", info["reason"]))
    else:
        rows.append(("driver", f"not found: {info['reason']}"))
    for d in gpus:
        rows.append((f"GPU {d['ordinal']}", f"{d['name']}, compute capability {d['compute_capability']} "
                                            f"({d['arch']}), {_human_bytes(d['total_memory'])}"))
    if not gpus:
        rows.append(("GPUs", "none"))
    rows.append(("default arch", f"{report['default_arch']['arch']} ({report['default_arch']['why']})"))
    cache = report["cache"]
    state = (f"disk, {_plural(cache['entries'], 'entry', 'entries')}, {_human_bytes(cache['bytes'])}"
             if cache["disk"] else "memory only")
    if cache["disk"] and cache.get("trust_group"):
        state += f", shared with group {cache['trust_group']}"
    elif not cache["disk"] and cache.get("disk_reason"):
        state += f": {cache['disk_reason']}"
    rows.append(("cache", f"{cache['directory'] or '(no directory)'} ({state})"))
    rows.append(("torch add-on", _torch_native_line(report["torch_native"])))
    if report["usable"]:
        rows.append(("status", "ok: NVRTC and the CUDA headers are usable"))
    else:
        rows.append(("status", "cannot compile: " + "; ".join(report["problems"]) +
                     " (pip install nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cuda-cccl, or install the CUDA "
                     "toolkit)"))
    width = max(len(k) for k, _ in rows) + 2
    for key, value in rows:
        print(f"{key + ':' if key else '':<{width}}{value}")
    return 0 if report["usable"] else 1


def _cmd_torch_build(args):
    from .torch import addon
    try:
        import torch
    except ImportError as e:
        print(f"jitbridge torch build: PyTorch is not importable ({e})", file=sys.stderr)
        return 1
    try:
        path, record = addon.build(torch)
    except addon.Unavailable as e:
        print(f"jitbridge torch build: {e.why}\nto fix: {e.fix}", file=sys.stderr)
        return 1
    how = f"built in {record.get('seconds', '?')} s" if record["built"] else "already built (cached)"
    print(f"{path}: {how} for torch {record.get('torch')} (CUDA {record.get('torch_cuda')}), {record.get('compiler')}")
    return 0


def _parser(prog):
    parser = _Parser(prog=prog, description="JIT-compile CUDA C++ with NVRTC and inspect the result.")
    parser.add_argument("--version", action="version", version=f"jitbridge {jitbridge.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    c = commands.add_parser("compile", help="compile a .cu file and list its kernels",
                            description="Compile FILE through the kernel cache and print each kernel's "
                                        "signature and resources.")
    c.add_argument("file", metavar="FILE", help="CUDA C++ source file")
    c.add_argument("--arch", help="target, e.g. sm_90, sm_90a, compute_90 (default: the GPU's, else "
                                  "$JITBRIDGE_ARCH, else sm_90); a comma-separated list (sm_80,sm_90) builds a "
                                  "fat binary (needs nvFatbin: pip install nvidia-nvfatbin)")
    c.add_argument("-o", "--output", metavar="OUT",
                   help="write the binary to OUT: the fat binary for a list of targets, else the cubin (PTX "
                        "for a compute_XY target)")
    c.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]",
                   help="define a macro (repeatable)")
    c.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="add an include directory (repeatable); FILE's directory is always searched")
    c.add_argument("--name-expression", action="append", default=[], metavar="EXPR",
                   help="a template instantiation to compile, e.g. 'scale<float, 4>' (repeatable)")
    c.add_argument("--option", action="append", default=[], metavar="OPT",
                   help="an NVRTC option, e.g. --option=-std=c++17 (repeatable)")
    c.add_argument("--ptx", action="store_true", help="also generate PTX and print it after the kernels")
    c.set_defaults(func=_cmd_compile)

    cache = commands.add_parser("cache", help="show or clear the kernel cache",
                                description="The kernel cache ($JITBRIDGE_CACHE_DIR, else "
                                            "~/.cache/jitbridge).")
    cache_commands = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    cache_commands.add_parser("info", help="where the cache is and how much it holds").set_defaults(
        func=_cmd_cache_info)
    cache_commands.add_parser("clear", help="remove every entry").set_defaults(func=_cmd_cache_clear)

    doctor = commands.add_parser("doctor", help="check NVRTC, the CUDA headers, the driver, GPUs and the cache",
                                 description="Print what jitbridge finds on this machine: for NVRTC, nvJitLink, "
                                             "the CUDA and CCCL headers and libcuda, the path picked, the rule that "
                                             "picked it and the places tried before. Exit status 0 when NVRTC and "
                                             "the headers are usable, 1 otherwise.")
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    torch_cmd = commands.add_parser("torch", help="the PyTorch add-on (jitbridge.torch's native runner)",
                                    description="The C++ add-on jitbridge.torch builds at first use against the "
                                                "installed torch, cached in the kernel cache directory.")
    torch_commands = torch_cmd.add_subparsers(dest="torch_command", metavar="ACTION", required=True)
    torch_commands.add_parser("build", help="build the add-on now (for images and clusters)").set_defaults(
        func=_cmd_torch_build)
    doctor.set_defaults(func=_cmd_doctor)
    return parser


def _default_prog():
    argv0 = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if argv0 in ("", "__main__.py", "-c") or argv0.startswith("python"):
        return "python3 -m jitbridge"
    return argv0


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"jitbridge: warning: {message}", file=sys.stderr if file is None else file)


def main(argv=None, prog=None):
    """Run the command line; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser(prog or _default_prog()).parse_args(join_option_values(argv))
    saved_showwarning = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        return args.func(args)
    except UserError as e:
        print(f"jitbridge: error: {e}", file=sys.stderr)
    except jitbridge.CompileError as e:
        print(f"jitbridge: error: {e.program_name or args.file} did not compile", file=sys.stderr)
        print(str(e).rstrip("\n"), file=sys.stderr)
    except (jitbridge.NvrtcError, jitbridge.NoDriverError, jitbridge.DriverError) as e:
        print(f"jitbridge: error: {e}", file=sys.stderr)
    except KeyboardInterrupt:
        print("jitbridge: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` & co.: stop quietly, and keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    finally:
        warnings.showwarning = saved_showwarning
    return 1
