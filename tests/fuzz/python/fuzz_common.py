"""fuzz_common.py — what the atheris targets share: finding the instrumented build, the marker line a finding
prints (scripts/fuzz classifies it), the exceptions jitbridge may raise, the comparison of an outcome with the
reference's set of allowed outcomes, and generators of specs biased toward the limits."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BUILD = os.environ.get("JITBRIDGE_FUZZ_BUILD", os.path.join(ROOT, "build-fuzz"))
sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.append(os.path.join(BUILD, "python_testing"))  # jitbridge_testing, the test hooks (fuzz_dlpack, fuzz_launch)
sys.path.insert(0, HERE)

import atheris  # noqa: E402

with atheris.instrument_imports(include=["jitbridge"]):
    import jitbridge  # noqa: E402

from hostile import ProducerError  # noqa: E402
from reference import Accept, Refuse  # noqa: E402

PROJECT_ERRORS = (jitbridge.CompileError, jitbridge.NvrtcError, jitbridge.NoDriverError, jitbridge.DriverError,
                  jitbridge.LaunchError)
ALLOWED = (TypeError, ValueError, OverflowError, BufferError) + PROJECT_ERRORS


class Finding(Exception):
    """A disagreement with the reference, or a forbidden exception: uncaught, it makes atheris save the input."""


def finding(kind, detail):
    """Stops the run: prints the marker line scripts/fuzz counts, then raises Finding. `detail` is
    "<what went wrong> | <the input>" (scripts/fuzz tells findings apart by the first part)."""
    sys.stderr.write(f"\nJB-FUZZ-FINDING: {kind}: {detail}\n")
    sys.stderr.flush()
    raise Finding(f"{kind}: {detail}")


def refused_ok(exc, context):
    """Whether `exc` is an acceptable refusal. Anything outside ALLOWED (and a producer's own ProducerError) is a
    finding: a RuntimeError from pybind11 ('Unable to cast'), SystemError, KeyError, MemoryError, ..."""
    if isinstance(exc, Finding):
        raise exc
    if isinstance(exc, ProducerError):
        return "producer"
    if isinstance(exc, ALLOWED):
        if isinstance(exc, RuntimeError) and not isinstance(exc, PROJECT_ERRORS):
            finding("bad-exception", f"{type(exc).__name__}: {exc} | {context}")
        if not str(exc):
            finding("bad-exception", f"a {type(exc).__name__} without a message | {context}")
        return "refused"
    finding("bad-exception", f"{type(exc).__module__}.{type(exc).__name__}: {exc} | {context}")


def judge_all(outcomes):
    """Folds the reference's outcomes (one per state a reader may have seen) into (may_refuse, accepts)."""
    may_refuse = any(isinstance(o, Refuse) for o in outcomes)
    accepts = [o for o in outcomes if isinstance(o, Accept)]
    return may_refuse, accepts


def check(call, outcomes, context, compare, producer_may_raise=False):
    """Runs `call` and checks its outcome against the reference's `outcomes`. `compare(result, facts)` returns a
    difference (text) or None. Returns the result when accepted."""
    may_refuse, accepts = judge_all(outcomes)
    try:
        result = call()
    except BaseException as exc:  # noqa: BLE001 - every exception is judged
        how = refused_ok(exc, context)
        if how == "producer" and not producer_may_raise:
            finding("bad-exception", f"a ProducerError escaped where no producer code raises | {context}")
        if isinstance(exc, jitbridge.NoDriverError) and accepts:
            return None  # validated, then stopped for want of a driver: an acceptance
        if not may_refuse:
            reasons = "; ".join(sorted({str(a.facts.get('shape', '')) for a in accepts}))
            finding("wrong-refusal", f"refused ({type(exc).__name__}: {exc}) an input the reference accepts | "
                                     f"shape {reasons}, {context}")
        return None
    if not accepts:
        reasons = "; ".join(sorted({o.reason for o in outcomes if isinstance(o, Refuse)}))
        finding("wrong-acceptance", f"accepted although {reasons} | {context}")
    differences = [compare(result, a.facts) for a in accepts]
    if all(d is not None for d in differences):
        finding("wrong-result", f"{differences[0]} | {context}")
    return result


# ---- spec generators ------------------------------------------------------------------------------------------------
EDGES = [0, 1, 2, 3, 7, 8, 16, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64,
         -1, -2, -2**31, -2**63, -2**63 - 1, 10**30]


def edgy_int(fdp):
    r = fdp.ConsumeIntInRange(0, 9)
    if r < 5:
        return fdp.ConsumeIntInRange(0, 8)
    if r < 8:
        return fdp.PickValueInList(EDGES)
    return fdp.ConsumeInt(9) - fdp.ConsumeIntInRange(0, 1) * 2**64


def int_spec(fdp, value=None, action_ok=True, allow_bad=True, actions=()):
    """An int-valued spec: mostly an int, sometimes an int subclass or an __index__ object (that may act once),
    and, with allow_bad, a bool, a float, a str, None or a raising object."""
    v = edgy_int(fdp) if value is None else value
    r = fdp.ConsumeIntInRange(0, 31)
    if r < 24:
        return ("int", v)
    if r < 26:
        return ("intsub", v)
    if r < 29 or not allow_bad:
        action = fdp.PickValueInList(list(actions)) if actions and action_ok and fdp.ConsumeBool() else None
        return ("index", v, action)
    return fdp.PickValueInList([("bool", True), ("bool", False), ("float", float(v % 97)), ("str", str(v)),
                                ("none",), ("raises",), ("object",), ("nd0", float(v % 97)), ("nd0", v % 2**63)])


def seq_spec(fdp, values, kinds=("tuple", "list"), allow_bad=True, actions=()):
    items = [int_spec(fdp, v, allow_bad=allow_bad, actions=actions) for v in values]
    return (fdp.PickValueInList(list(kinds)), items)


def one_action_only(specs_with_actions):
    """Leaves the first action found in a nested spec structure and removes the others (the reference models
    one hostile action per input)."""
    seen = [False]

    def walk(s):
        if isinstance(s, tuple) and s and s[0] in ("index", "truth", "floatlike"):
            if s[2] is not None:
                if seen[0]:
                    return (s[0], s[1], None)
                seen[0] = True
            return s
        if isinstance(s, tuple) and s and s[0] in ("tuple", "tuplesub", "list", "listsub", "iter"):
            return (s[0], [walk(x) for x in s[1]])
        return s
    return walk(specs_with_actions)


def run(test_one, argv=None):
    atheris.Setup(argv or sys.argv, test_one)
    atheris.Fuzz()
