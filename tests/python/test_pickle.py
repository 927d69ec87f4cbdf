"""Pickling Program, RawKernel, RawModule and get_function kernels (compile side: NVRTC runs without a GPU).

The pickled state is the compile request, never a binary: unpickling compiles again (or hits the cache), here
and in a spawned process. Launching unpickled kernels is tests/python/test_pickle_gpu.py.
"""

import multiprocessing
import os
import pickle

import pytest

import jitbridge
from jitbridge import _pickle

SOURCE = r"""
template <class T> __global__ void scale(T* x, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


def _facts(program):
    """What must survive a round trip: the binary, the kernels with their lowered names and signatures."""
    return (program.arch, program.cubin, [(k.name, k.lowered_name, str(k.signature)) for k in program.kernels])


def test_program_round_trips_with_the_same_binary_and_signatures():
    program = jitbridge.compile(SOURCE, name_expressions=["scale<float>"], options=["-DUNUSED=1"])
    again = pickle.loads(pickle.dumps(program))
    assert isinstance(again, jitbridge.Program)
    assert _facts(again) == _facts(program)
    assert again.lowered_name("scale<float>") == program.lowered_name("scale<float>")
    assert again._request == program._request


def test_state_has_absolute_include_paths_and_no_toolkit_paths(tmp_path, monkeypatch):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "factor.h").write_text("#define FACTOR 3\n")
    monkeypatch.chdir(tmp_path)
    program = jitbridge.compile('#include "factor.h"\n' + SOURCE, options=["-Iinc", "-I", "inc"],
                                include_paths=["inc"], headers={"mem.h": "int x;"})
    state = _pickle.program_state(program)
    assert state["options"] == [f"-I{inc}", "-I", str(inc)]
    assert state["include_paths"] == [str(inc)]
    assert state["headers"] == [("mem.h", b"int x;")]
    assert state["arch"] is None and state["v"] == _pickle.STATE_VERSION
    # The toolkit's include dirs are in the options NVRTC got, never in the state.
    text = repr(state)
    for d in jitbridge.toolkit_include_dirs():
        assert any(d in o for o in program.options)
        assert d not in text
    # Unpickled elsewhere (another working directory), the relative -I still finds the header.
    monkeypatch.chdir(os.sep)
    assert _facts(pickle.loads(pickle.dumps(program))) == _facts(program)


def test_explicit_arch_is_kept_and_default_arch_stays_default():
    assert _pickle.program_state(jitbridge.compile(SOURCE, arch="sm_80"))["arch"] == "sm_80"
    assert _pickle.program_state(jitbridge.compile(SOURCE))["arch"] is None
    # The same binary asked for with and without an explicit arch: each program keeps its own request.
    default = jitbridge.compile(SOURCE)
    explicit = jitbridge.compile(SOURCE, arch=default.arch)
    assert default._request["arch"] is None and explicit._request["arch"] == default.arch
    assert pickle.loads(pickle.dumps(explicit))._request["arch"] == default.arch


def test_raw_kernel_module_and_get_function_round_trip():
    k = jitbridge.RawKernel(SOURCE, "axpy")
    m = jitbridge.RawModule(code=SOURCE, name_expressions=["scale<float>", "scale<double>"])
    f = m.get_function("scale<float>")
    k2, m2, f2, g2 = pickle.loads(pickle.dumps((k, m, f, m.get_function("scale<double>"))))
    assert type(k2) is jitbridge.RawKernel and type(m2) is jitbridge.RawModule
    assert (k2.name, str(k2.signature), k2.lowered_name) == (k.name, str(k.signature), k.lowered_name)
    assert m2.kernel_names() == m.kernel_names()
    assert (f2.name, str(f2.signature)) == ("scale<float>", "(float*, float, int)")
    assert str(g2.signature) == "(double*, double, int)"
    assert f2._module is g2._module  # kernels of one module share it within one pickle
    assert _facts(m2.program) == _facts(m.program)


def test_kernel_settings_survive():
    k = jitbridge.RawKernel(SOURCE, "axpy")
    k.check_args = False  # per-kernel settings are kept by name (jitbridge/_pickle.py KERNEL_SETTINGS)
    assert pickle.loads(pickle.dumps(k)).check_args is False
    assert _pickle.kernel_settings(k) == {"check_args": False}


@pytest.mark.parametrize("check_args", [True, False])
def test_module_check_args_survives_and_reaches_its_kernels(check_args):
    m = jitbridge.RawModule(SOURCE, check_args=check_args)
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.get_function("axpy").check_args is check_args
    assert m.get_function("axpy").check_args is check_args


def test_module_from_program_hands_out_checked_kernels_and_pickles():
    """RawModule.from_program (used for jitbridge.link's results) builds a complete module: its kernels check
    their arguments by default, and it pickles like any other module."""
    m = jitbridge.RawModule.from_program(jitbridge.compile(SOURCE))
    assert m.get_function("axpy").check_args is True
    m2 = pickle.loads(pickle.dumps(m))
    assert str(m2.get_function("axpy").signature) == "(float, float const*, float*, int)"


def test_file_module_pickles_its_image_not_its_path(tmp_path):
    program = jitbridge.compile(SOURCE)
    path = tmp_path / "marker-directory-name" / "k.cubin"
    path.parent.mkdir()
    path.write_bytes(program.cubin)
    m = jitbridge.RawModule(path=path)
    data = pickle.dumps(m)
    assert b"marker-directory-name" not in data
    path.unlink()
    again = pickle.loads(data)
    assert again._module._image == program.cubin and again.program is None


class _Forged:
    """Pickles as a state of another version, as a future jitbridge could write."""

    def __init__(self, rebuild, state):
        self.rebuild, self.state = rebuild, state

    def __reduce__(self):
        return self.rebuild, (self.state,)


@pytest.mark.parametrize("version", [0, 2, None, "1"])
def test_unknown_state_version_says_to_recompile(version):
    state = _pickle.program_state(jitbridge.compile(SOURCE))
    state["v"] = version
    for rebuild in (_pickle.rebuild_program, _pickle.rebuild_module_core):
        with pytest.raises(pickle.UnpicklingError, match="recompile"):
            pickle.loads(pickle.dumps(_Forged(rebuild, state)))
    with pytest.raises(pickle.UnpicklingError, match="recompile"):
        pickle.loads(pickle.dumps(_Forged(_pickle.rebuild_program, "not a dict")))


def _child_unpickle(data, cache_off):
    """In a spawned process: unpickle and report what came out."""
    if cache_off:
        os.environ["JITBRIDGE_CACHE"] = "0"
    import pickle as p

    k, f, program = p.loads(data)
    # k was unpickled first: its program is the child's first compile (f and program share one request).
    return (k.name, str(k.signature), f.name, str(f.signature), k.program.origin, _facts(program))


@pytest.mark.parametrize("cache_off", [True, False])
def test_spawned_process_compiles_or_reads_the_cache(cache_off):
    m = jitbridge.RawModule(code=SOURCE, name_expressions=["scale<float>"])
    k = jitbridge.RawKernel(SOURCE, "axpy")
    data = pickle.dumps((k, m.get_function("scale<float>"), m.program))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        name, sig, fname, fsig, origin, facts = pool.apply(_child_unpickle, (data, cache_off))
        # A worker that exits (leaving the block would kill it) runs its exit handlers: they remove its
        # directory in /tmp.
        pool.close()
        pool.join()
    assert (name, sig) == ("axpy", "(float, float const*, float*, int)")
    assert (fname, fsig) == ("scale<float>", "(float*, float, int)")
    assert facts == _facts(m.program)
    # A fresh process: compiled there (cache off), or read from the session's disk cache.
    assert origin == ("compiled" if cache_off else "disk")
