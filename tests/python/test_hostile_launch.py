"""Hostile but ordinary launch inputs without a GPU: configuration values that are not ints, raise, or overflow; producers that mutate the argument list; raising flags; strings with no UTF-8 form.

Every case must end in a precise exception naming the argument (an ordinary exception raised by the user's
own __index__/__bool__ becomes its __cause__; KeyboardInterrupt and the like propagate as they are), never a
crash, a swallowed error or pybind11's "Unable to cast". Arrays are jitbridge.from_ptr views or
__cuda_array_interface__ objects at made-up device addresses (nothing is dereferenced)."""
import os
import sys

import numpy as np
import pytest

import jitbridge
from gpu_frameworks import MADE_UP_ADDRESSES
from hostile import Index
from testing_hooks import hooks

pytestmark = MADE_UP_ADDRESSES

SRC = r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {}
'''
ADDR = 0x7F0000001000
BAD_CONFIG_INTS = [0, -1, 2 ** 32, 2 ** 63 - 1, 2 ** 63, 2 ** 64, -(2 ** 63) - 1, 10 ** 30]


@pytest.fixture(scope="module")
def s():
    return jitbridge.RawKernel(SRC, "saxpy", arch="sm_90")


def dev(addr=ADDR):
    return jitbridge.from_ptr(addr, (16,), "float32", device="cuda:0")


def good_args():
    return (2.5, dev(), dev(ADDR + 4096), 7)


def launch_or_no_driver(fn):
    """Runs a launch that is valid up to the driver: here it stops at NoDriverError; on a GPU machine the
    (empty) kernel runs on made-up addresses, which it never touches."""
    try:
        fn()
    except jitbridge.NoDriverError:
        pass


class Counted:
    """An int-like that counts its __index__ calls."""

    def __init__(self, value):
        self.value, self.calls = value, 0

    def __index__(self):
        self.calls += 1
        return self.value


class Raises:
    """Whose __index__ and __bool__ raise `exc`."""

    def __init__(self, exc):
        self.exc = exc

    def __index__(self):
        raise self.exc

    def __bool__(self):
        raise self.exc


class Recorder:
    """A CAI producer that notes each read of its property in `log` (optionally running `effect` first)."""

    def __init__(self, label, log, effect=None, addr=ADDR):
        self.label, self.log, self.effect, self.addr = label, log, effect, addr

    @property
    def __cuda_array_interface__(self):
        self.log.append(self.label)
        if self.effect:
            self.effect()
        return {"shape": (16,), "typestr": "<f4", "data": (self.addr, False), "version": 3}


# ---- 1. configuration values: grid, block, cluster, shared_mem, k[...] ----------------------------

def test_a_zero_d_numpy_float_as_grid_is_a_type_error_naming_grid(s):
    """Used to segfault (PyNumber_Index's NULL used as an int)."""
    for call in (lambda: s(np.array(4.0), 32, good_args()),
                 lambda: s((np.array(4.0),), 32, good_args()),
                 lambda: s[np.array(4.0), 32]):
        with pytest.raises(TypeError, match=r"^grid: x: expected an int, got ndarray whose __index__\(\) failed "
                                            r"\(TypeError: only integer scalar arrays") as info:
            call()
        assert isinstance(info.value.__cause__, TypeError)  # NumPy's own reason, kept as the cause
    with pytest.raises(TypeError, match=r"^block: y: expected an int, got ndarray whose"):
        s(1, [32, np.array(2.0)], good_args())
    with pytest.raises(TypeError, match=r"^cluster: x: expected an int, got ndarray whose"):
        s(1, 32, good_args(), cluster=np.array(1.0))
    with pytest.raises(TypeError, match=r"^grid: expected an int or a tuple of up to 3 ints, got float$"):
        s(1.0, 32, good_args())


@pytest.mark.parametrize("where", ["grid", "block", "grid-tuple", "cluster", "numba"])
def test_an_index_that_raises_is_a_type_error_naming_the_argument(s, where):
    boom = ValueError("boom")
    calls = {
        "grid": lambda v: s(v, 32, good_args()),
        "block": lambda v: s(1, v, good_args()),
        "grid-tuple": lambda v: s((1, 1, v), 32, good_args()),
        "cluster": lambda v: s(1, 32, good_args(), cluster=(v, 1)),
        "numba": lambda v: s[1, v],
    }
    named = r"^(grid|block|cluster): (x|y|z): expected an int, got Raises whose __index__\(\) failed"
    with pytest.raises(TypeError, match=named + r" \(ValueError: boom\)$") as info:
        calls[where](Raises(boom))
    assert info.value.__cause__ is boom  # the user's own exception, kept
    with pytest.raises(TypeError, match=named + r" \(TypeError: nope\)$"):
        calls[where](Raises(TypeError("nope")))
    stop = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt) as info:  # not an ordinary Exception: propagates as it is
        calls[where](Raises(stop))
    assert info.value is stop


@pytest.mark.parametrize("value", BAD_CONFIG_INTS)
@pytest.mark.parametrize("wrap", [int, Index, np.int64], ids=["int", "index", "np.int64"])
def test_grid_and_block_values_out_of_range_are_value_errors(s, value, wrap):
    if wrap is np.int64 and not -(2 ** 63) <= value < 2 ** 63:
        pytest.skip("not an int64")
    v = wrap(value)
    text = str(value)
    if wrap is Index and not -(2 ** 63) <= value < 2 ** 63:  # described by repr(), its __index__ not run twice
        text = r"<hostile\.Index object at 0x[0-9a-f]+>"
    with pytest.raises(ValueError, match=rf"^grid: x = {text} is out of range \(1 to 2\*\*32-1\)$"):
        s(v, 32, good_args())
    with pytest.raises(ValueError, match=rf"^block: z = {text} is out of range"):
        s(1, (1, 1, v), good_args())
    with pytest.raises(ValueError, match=rf"^grid: y = {text} is out of range"):
        s[(1, v), 32]
    with pytest.raises(ValueError, match=rf"^cluster: x = {text} is out of range"):
        s(1, 32, good_args(), cluster=v)


def test_huge_index_results_are_named_not_cast_errors(s):
    for value in (2 ** 64, 2 ** 200, -(2 ** 100)):
        with pytest.raises(ValueError, match=r"^grid: x = -?\d+(\.\.\.)? is out of range"):
            s(value, 32, good_args())
        with pytest.raises(ValueError, match=r"^grid: x = <hostile\.Index object at 0x[0-9a-f]+> is out of range"):
            s(Index(value), 32, good_args())
    # Beyond str()'s digit limit the value is described, not printed; an __index__ runs once.
    with pytest.raises(ValueError, match=r"^block: x = <a int> is out of range"):
        s(1, 10 ** 5000, good_args())
    counted = Counted(10 ** 5000)
    with pytest.raises(ValueError, match=r"^block: x = <test_hostile_launch\.Counted object at 0x[0-9a-f]+> is out"):
        s(1, counted, good_args())
    assert counted.calls == 1


def test_the_limits_themselves_are_accepted(s):
    top = 2 ** 32 - 1
    configured = s[(top, np.uint32(top), Index(top)), np.int16(32), None, top]
    assert repr(configured) == f"<saxpy[({top}, {top}, {top}), (32, 1, 1)]>"
    launch_or_no_driver(lambda: s(1, 32, good_args(), shared_mem=np.uint64(0)))


@pytest.mark.parametrize("value", [-1, 2 ** 32, 2 ** 63, 2 ** 64, -(2 ** 63) - 1])
def test_shared_mem_out_of_range(s, value):
    expected = "is negative" if value < 0 else r"bytes is out of range \(0 to 2\*\*32-1\)"
    with pytest.raises(ValueError, match=rf"^shared_mem: {value} {expected}$"):
        s(1, 32, good_args(), shared_mem=value)
    with pytest.raises(ValueError, match=rf"^shared_mem: ({value}|<hostile\.Index object .*>) (is negative|bytes is out of range)"):
        s[1, 32](*good_args(), shared_mem=Index(value))
    with pytest.raises(ValueError, match=rf"^shared_mem: {value} {expected}$"):
        s[1, 32, None, value]


@pytest.mark.parametrize("config, exc, words", [
    ((1, 32, None, "x"), TypeError, "shared_mem: expected an int, got str"),
    ((1, 32, None, 1.5), TypeError, "shared_mem: expected an int, got float"),
    ((1, 32, None, True), TypeError, "shared_mem: expected an int, got bool"),
    ((1, 32, None, np.array(4.0)), TypeError, "shared_mem: expected an int, got ndarray whose __index__() failed"),
    ((1, 32, None, 2 ** 63), ValueError, "shared_mem: 9223372036854775808 bytes is out of range"),
    ((1, 32, None, -5), ValueError, "shared_mem: -5 is negative"),
    (("1", 32), TypeError, "grid: expected an int or a tuple of up to 3 ints, got str"),
    ((1, None), TypeError, "block: expected an int or a tuple of up to 3 ints, got NoneType"),
    ((1, ()), ValueError, "block: expected 1 to 3 dimensions, got 0"),
    (((1, 2, 3, 4), 32), ValueError, "grid: expected 1 to 3 dimensions, got 4"),
    ((True, 32), TypeError, "grid: expected an int or a tuple of up to 3 ints, got bool"),
    (((1, False), 32), TypeError, "grid: y: expected an int, got bool"),
    ((2 ** 64, 32), ValueError, "grid: x = 18446744073709551616 is out of range"),
    ((1,), TypeError, "item(s)"),
    ((1, 2, 3, 4, 5), TypeError, "got 5 item(s)"),
    ([1, 32], TypeError, "got 1 item(s)"),
])
def test_bad_numba_style_configurations(s, config, exc, words):
    with pytest.raises(exc) as info:
        s[config]
    assert words in str(info.value)
    assert "Unable to cast" not in str(info.value)


def test_an_uninitialised_kernel_is_refused_not_crashed():
    k = jitbridge.RawKernel.__new__(jitbridge.RawKernel)
    with pytest.raises(TypeError, match="not initialised"):
        k[1, 32]
    with pytest.raises(TypeError, match="not initialised"):
        k(1, 32, ())
    cls = jitbridge._core._Configured
    with pytest.raises(TypeError, match="not initialised"):
        cls.__new__(cls)()


def uses_of(obj):
    """Every property read and method call of a bound object (made by __new__ alone), with plausible arguments."""
    for name in dir(type(obj)):
        if name.startswith("__") and name not in ("__repr__", "__str__", "__len__", "__iter__", "__getitem__"):
            continue
        if name in ("_pybind11_conduit_v1_", "_from_image", "_from_module"):  # not methods of an instance
            continue
        attr = getattr(type(obj), name)
        if attr is getattr(object, name, None):  # object's own __repr__ and the like need nothing
            continue
        if isinstance(attr, property):
            yield name, lambda attr=attr: attr.fget(obj)
        elif callable(attr):
            args = {"__getitem__": (0,), "kernel": ("k",), "lowered_name": ("k",), "_global": ("g",),
                    "max_active_blocks_per_sm": (32,)}.get(name, ())
            yield name, lambda attr=attr, args=args: attr(obj, *args)


@pytest.mark.parametrize("cls", ["RawKernel", "_Kernel", "_Module", "_Configured", "Program", "Kernel", "Signature",
                                 "Param", "Resources"])
def test_objects_made_by_new_alone_are_refused_by_every_method(cls):
    """pybind11 hands a method of an instance whose __init__ never ran raw, unconstructed memory: repr() of a
    RawKernel whose construction failed (pytest prints it in tracebacks) crashed the process."""
    t = getattr(jitbridge, cls, None) or getattr(jitbridge._core, cls)
    obj = t.__new__(t)
    uses = list(uses_of(obj))
    assert len(uses) >= 2
    for name, use in uses:
        with pytest.raises(TypeError, match="not initialised"):
            use()


def test_unbound_methods_called_on_other_objects_are_refused(s):
    with pytest.raises(TypeError, match="expected a jitbridge._core._Kernel instance, got int"):
        jitbridge._core._Kernel.__getitem__(5, (1, 32))
    with pytest.raises(TypeError, match="expected a jitbridge._core.Program instance, got str"):
        jitbridge._core.Program.arch.fget("x")
    with pytest.raises(TypeError, match="expected a jitbridge._core.Param instance, got jitbridge._core.Signature"):
        jitbridge._core.Param.size.fget(s.signature)


def test_a_grid_list_changed_by_an_items_index_is_read_as_it_was(s):
    grid = []
    grid += [Index(3, action=grid.clear), 5, 7]
    assert repr(s[grid, 32]) == "<saxpy[(3, 5, 7), (32, 1, 1)]>"  # read from a copy, not the emptied list
    assert grid == []


def test_occupancy_queries_and_synchronize_check_their_ints(s):
    with pytest.raises(ValueError, match=r"^block_size: 1099511627776 is out of range \(1 to 2\*\*31-1\)$"):
        s.max_active_blocks_per_sm(2 ** 40)
    with pytest.raises(TypeError, match="^block_size: expected an int, got str$"):
        s.max_active_blocks_per_sm("256")
    with pytest.raises(ValueError, match="^shared_mem: -1 is negative$"):
        s.max_active_blocks_per_sm(256, shared_mem=-1)
    with pytest.raises(ValueError, match=r"^shared_mem: 18446744073709551616 bytes is out of range"):
        s.suggest_block_size(shared_mem=2 ** 64)
    with pytest.raises(ValueError, match=r"^block_size_limit: -1 is out of range \(0 to 2\*\*31-1\)$"):
        s.suggest_block_size(block_size_limit=-1)
    with pytest.raises(ValueError, match="^device: 18446744073709551616 is not a device ordinal"):
        jitbridge._core.synchronize(2 ** 64)
    with pytest.raises(ValueError, match="^device: -1 is not a device ordinal"):
        jitbridge._core.synchronize(-1)
    with pytest.raises(TypeError, match="^device: expected an int, got str$"):
        jitbridge._core.synchronize("0")
    with pytest.raises(TypeError, match="^device: expected an int, got ndarray whose"):
        jitbridge._core.synchronize(np.array(0.0))


def test_stream_handles_out_of_range_are_named(s):
    for call in (lambda v: s(1, 32, good_args(), stream=v), lambda v: s[1, 32, v](*good_args())):
        with pytest.raises(OverflowError, match="^stream: .*18446744073709551616.*64-bit range"):
            call(2 ** 64)
        with pytest.raises(ValueError, match="^stream: a stream handle cannot be negative"):
            call(-1)
        with pytest.raises(TypeError, match="^stream: expected"):
            call("0")


# ---- kernel arguments whose conversion raises ------------------------------------------------------

def test_kernel_arguments_whose_index_or_float_raises_are_named(s):
    boom = RuntimeError("boom")
    with pytest.raises(TypeError, match=r"^saxpy: argument 3: __index__\(\) of the Raises failed "
                                        r"\(RuntimeError: boom\)$") as info:
        hooks.pack_args(s, 2.5, dev(), dev(), Raises(boom))
    assert info.value.__cause__ is boom

    class BadFloat:
        def __float__(self):
            raise ArithmeticError("no float")

    with pytest.raises(TypeError, match=r"^saxpy: argument 0: float\(\) of the BadFloat failed "
                                        r"\(ArithmeticError: no float\)$"):
        hooks.pack_args(s, BadFloat(), dev(), dev(), 7)
    with pytest.raises(TypeError, match=r"^saxpy: argument 0"):
        s(1, 32, (BadFloat(), dev(), dev(), 7))


def test_a_kernel_argument_past_strs_digit_limit_is_an_overflow_error(s):
    """Used to raise str()'s ValueError about its digit limit while wording the OverflowError."""
    with pytest.raises(OverflowError, match=r"^saxpy: argument 3: <a int> does not fit in any integer parameter$"):
        hooks.pack_args(s, 2.5, dev(), dev(), 10 ** 5000)
    with pytest.raises(OverflowError, match=r"^saxpy: argument 3: -?\d+ does not fit"):
        hooks.pack_args(s, 2.5, dev(), dev(), -(2 ** 64))


# ---- 2. the argument container changed while the arguments convert ---------------------------------

class ListSubclass(list):
    pass


@pytest.mark.parametrize("container", [list, ListSubclass])
def test_a_property_that_replaces_the_argument_list_in_place(s, container):
    """The list's item array is reused with other objects: the launch must still see the ones it was given
    (before, it read the replacements: the launch took borrowed pointers into the list)."""
    log = []
    args = container()
    replacement = [0.5, Recorder("new x", log), Recorder("new y", log), 9]
    args += [2.5, Recorder("x", log, effect=lambda: args.__setitem__(slice(None), replacement)),
             Recorder("y", log), 7]
    launch_or_no_driver(lambda: s(1, 32, args))
    assert "y" in log and "new x" not in log and "new y" not in log, log
    assert args == replacement


@pytest.mark.parametrize("container", [list, ListSubclass])
def test_a_property_that_empties_and_regrows_the_argument_list(s, container):
    """The list's item array is freed (clear) and a larger one made: the launch must not read the freed one
    (ASan: heap-use-after-free before the fix; the normal build crashed or read garbage)."""
    log = []
    args = container()

    def regrow():
        args.clear()
        args.extend(Recorder("new", log) for _ in range(1000))

    args += [2.5, Recorder("x", log, effect=regrow), Recorder("y", log, addr=ADDR + 4096), 7]
    launch_or_no_driver(lambda: s(1, 32, args))
    assert "y" in log and "new" not in log, log
    assert len(args) == 1000


def test_a_list_subclass_is_read_by_its_items_not_its_overrides(s):
    class Lying(list):
        def __iter__(self):
            raise AssertionError("the launch reads the list's own items")

        def __len__(self):
            return 0

        def __getitem__(self, i):
            raise AssertionError("the launch reads the list's own items")

    launch_or_no_driver(lambda: s(1, 32, Lying(good_args())))
    with pytest.raises(TypeError, match="takes 4 arguments, 3 given"):
        s(1, 32, Lying(good_args()[:3]))


def test_a_tuple_keeps_its_items_alive_while_a_property_drops_every_other_reference(s):
    log = []
    holder = [Recorder("y", log, addr=ADDR + 4096)]
    args = (2.5, Recorder("x", log, effect=holder.clear), holder[0], 7)
    launch_or_no_driver(lambda: s(1, 32, args))
    assert log.count("y") >= 1 and holder == []


# ---- 3. flags whose truth raises -------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["cooperative", "programmatic_dependent"])
def test_a_flag_whose_bool_raises_is_reported_at_once(s, flag):
    """Used to be ignored (PyObject_IsTrue(...) == 1): the error stayed set and surfaced later, elsewhere."""
    log = []
    args = (2.5, Recorder("x", log), dev(), 7)
    boom = ZeroDivisionError("flag")
    with pytest.raises(TypeError, match=rf"^{flag}: bool\(\) of the Raises failed \(ZeroDivisionError: flag\)$") as info:
        s(1, 32, args, **{flag: Raises(boom)})
    assert info.value.__cause__ is boom and log == []  # raised before any argument was read
    with pytest.raises(TypeError, match=rf"^{flag}: bool\(\) of the Raises failed"):
        s[1, 32](*args, **{flag: Raises(ZeroDivisionError())})
    with pytest.raises(TypeError, match=rf"^{flag}: bool\(\) of the ndarray failed \(ValueError: .*ambiguous"):
        s(1, 32, args, **{flag: np.array([True, False])})
    stop = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt) as info:
        s(1, 32, args, **{flag: Raises(stop)})
    assert info.value is stop and log == []


def test_flags_take_ordinary_truth_values(s):
    for value in (True, False, None, 0, 1, np.bool_(True), [], [1]):
        launch_or_no_driver(lambda: s(1, 32, good_args(), cooperative=value, programmatic_dependent=value))


# ---- 4. keyword names and other checked results -----------------------------------------------------

def test_a_keyword_name_with_no_utf8_form_is_just_unknown(s):
    with pytest.raises(TypeError, match=r"unexpected keyword argument '\\ud800'"):
        s(1, 32, good_args(), **{"\ud800": 1})
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'str\\udcff'"):
        s[1, 32](*good_args(), **{"str\udcff": 1})


def test_headers_whose_items_are_not_pairs():
    class Odd(dict):
        def items(self):
            return [("a.h",), ["b.h", "x"]]

    with pytest.raises(TypeError, match=r"^headers: items\(\) must give \(name, text\) pairs, got a tuple$"):
        jitbridge.compile(SRC, headers=Odd(), arch="sm_90")


def test_include_path_fspath_errors_name_the_item():
    class BadPath:
        def __fspath__(self):
            raise OSError("no path today")

    class Gives:
        def __init__(self, value):
            self.value = value

        def __fspath__(self):
            return self.value

    with pytest.raises(TypeError, match=r"^include_paths\[0\]: os.fspath\(\) of the BadPath failed "
                                        r"\(OSError: no path today\)$") as info:
        jitbridge.compile(SRC, include_paths=[BadPath()], arch="sm_90")
    assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(ValueError, match=r"^include_paths\[1\] is not valid text"):
        jitbridge.compile(SRC, include_paths=["/tmp", Gives("/tmp/\ud800")], arch="sm_90")
    with pytest.raises(TypeError, match=r"^include_paths\[0\]: expected str, got bytes$"):
        jitbridge.compile(SRC, include_paths=[Gives(b"/tmp")], arch="sm_90")


# ---- 5. strings with no UTF-8 form -----------------------------------------------------------------

LONE = "\ud800"


@pytest.mark.parametrize("kwargs, name", [
    ({"options": ["-DX=1", "-D" + LONE]}, "options[1]"),
    ({"name_expressions": [LONE]}, "name_expressions[0]"),
    ({"include_paths": [LONE]}, "include_paths[0]"),
    ({"headers": {LONE: "int x;"}}, "headers: a header name"),
    ({"headers": {"a.h": "// " + LONE}}, "headers['a.h']"),
    ({"arch": "sm_" + LONE}, "arch"),
    ({"program_name": LONE + ".cu"}, "program_name"),
    ({"code": "// " + LONE}, "code"),
])
def test_lone_surrogates_in_compile_arguments_are_value_errors_naming_them(kwargs, name):
    args = {"code": SRC, "arch": "sm_90", **kwargs}
    code = args.pop("code")
    with pytest.raises(ValueError) as info:
        jitbridge.compile(code, **args)
    message = str(info.value)
    assert message.startswith(f"{name} is not valid text (UnicodeEncodeError: "), message
    assert "surrogates not allowed" in message
    assert isinstance(info.value.__cause__, UnicodeEncodeError)


def test_lone_surrogates_in_kernel_names_are_value_errors_naming_them(s):
    with pytest.raises(ValueError, match=r"^name is not valid text"):
        jitbridge.RawKernel(SRC, LONE, arch="sm_90")
    with pytest.raises(ValueError, match=r"^options\[0\] is not valid text"):
        jitbridge.RawKernel(SRC, "saxpy", options=[LONE], arch="sm_90")
    with pytest.raises(ValueError, match=r"^name is not valid text"):
        s.program.kernel(LONE)
    with pytest.raises(ValueError, match=r"^name_expression is not valid text"):
        s.program.lowered_name(LONE)
    m = jitbridge.RawModule(code=SRC, arch="sm_90")
    with pytest.raises(ValueError, match=r"^name is not valid text"):
        m.get_function(LONE)
    with pytest.raises(ValueError, match=r"^name is not valid text"):
        m.get_global(LONE)
    with pytest.raises(TypeError, match=r"^name: expected str, got int$"):
        s.program.kernel(3)
    with pytest.raises(TypeError, match=r"^name: expected str, got list$"):  # not "unhashable type"
        m.get_function(["saxpy"])
    with pytest.raises(TypeError, match=r"^name: expected str, got bytes$"):
        m.get_global(b"g")


def test_a_bare_str_as_options_is_refused_not_split_into_characters():
    with pytest.raises(TypeError, match=r"^options: expected a sequence of str, got str; .* options=\('-DX=1',\)$"):
        jitbridge.RawKernel(SRC, "saxpy", options="-DX=1", arch="sm_90")
    with pytest.raises(TypeError, match=r"^name_expressions: expected a sequence of str, got str; .* name_expressions=\('saxpy',\)$"):
        jitbridge.RawModule(code=SRC, name_expressions="saxpy", arch="sm_90")
    k = jitbridge.RawKernel(SRC, "saxpy", options=(o for o in ["-DX=1"]), arch="sm_90")  # iterators still work
    assert "-DX=1" in k.program.options


# ---- property test: launch configurations against a reference validator ---------------------------

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is optional
    given = None


def expected_dim(value):
    """The reference: the Dim3 a grid/block value must give, or None when it must be refused."""
    def one(v):
        if isinstance(v, (bool, np.bool_)) or not hasattr(type(v), "__index__"):
            return None
        try:
            i = v.__index__()
        except Exception:
            return None
        return i if 1 <= i <= 2 ** 32 - 1 else None

    if isinstance(value, (tuple, list)):
        if not 1 <= len(value) <= 3:
            return None
        dims = [one(v) for v in value]
        return None if None in dims else tuple(dims + [1] * (3 - len(dims)))
    d = one(value)
    return None if d is None else (d, 1, 1)


def expected_shared(value):
    if isinstance(value, (bool, np.bool_)) or not hasattr(type(value), "__index__"):
        return None
    try:
        i = value.__index__()
    except Exception:
        return None
    return i if 0 <= i <= 2 ** 32 - 1 else None


if given is not None:
    edge_ints = st.sampled_from([0, 1, -1, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 63 - 1, 2 ** 63,
                                 2 ** 64, -(2 ** 63), -(2 ** 63) - 1])
    ints = st.one_of(edge_ints, st.integers(min_value=-(2 ** 70), max_value=2 ** 70), st.integers(1, 1024))
    scalars = st.one_of(
        ints,
        ints.map(Index),
        st.integers(-(2 ** 63), 2 ** 63 - 1).map(np.int64),
        st.integers(0, 2 ** 64 - 1).map(np.uint64),
        st.floats(allow_nan=True),
        st.floats(-10, 10).map(np.array),
        st.integers(1, 8).map(np.array),  # 0-d integer arrays have __index__
        st.booleans(),
        st.none(),
        st.text(max_size=3),
        st.sampled_from([Raises(ValueError("v")), Raises(TypeError("t")), np.array([1, 2])]),
    )
    dims = st.one_of(scalars, st.lists(scalars, max_size=4).map(tuple), st.lists(scalars, max_size=4))

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(grid=dims, block=dims, shared=scalars)
    def test_any_configuration_is_taken_exactly_or_refused_with_a_named_error(s, grid, block, shared):
        want_grid, want_block, want_shared = expected_dim(grid), expected_dim(block), expected_shared(shared)
        try:
            configured = s[grid, block, None, shared]
        except (TypeError, ValueError) as e:
            message = str(e)
            assert "Unable to cast" not in message
            assert message.startswith(("grid", "block", "shared_mem")), message
            assert None in (want_grid, want_block, want_shared), (grid, block, shared, message)
            return
        assert None not in (want_grid, want_block, want_shared), (grid, block, shared)
        assert repr(configured) == "<saxpy[({}, {}, {}), ({}, {}, {})]>".format(*want_grid, *want_block)
else:  # pragma: no cover
    def test_any_configuration_is_taken_exactly_or_refused_with_a_named_error():
        pytest.skip("hypothesis is not installed")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([os.path.abspath(__file__), "-q"]))
