# _kernels.pyi — RawKernel and RawModule for type checkers (hand-written from _kernels.py and the compiled _Kernel).
import collections.abc
import os
import typing

from . import _core
from ._core import ArrayView, Program, Resources, Signature

# A grid, block or cluster: an int or up to 3 ints.
_Dim = int | tuple[int] | tuple[int, int] | tuple[int, int, int]

class RawKernel(_core._Kernel):
    def __init__(
        self,
        code: str | bytes,
        name: str,
        options: collections.abc.Sequence[str] = ...,
        name_expressions: collections.abc.Sequence[str] | None = ...,
        *,
        headers: collections.abc.Mapping[str, str | bytes] | None = ...,
        include_paths: collections.abc.Sequence[str | os.PathLike[str]] = ...,
        arch: str | collections.abc.Sequence[str] | None = ...,
        program_name: str = ...,
        check_args: bool = ...,
    ) -> None: ...
    def __call__(
        self,
        grid: _Dim,
        block: _Dim,
        args: tuple[typing.Any, ...] | list[typing.Any],
        *,
        shared_mem: int = ...,
        stream: typing.Any = ...,
        cluster: _Dim | None = ...,
        cooperative: bool = ...,
        programmatic_dependent: bool = ...,
        check_args: bool = ...,
    ) -> None: ...
    def __getitem__(self, config: _Dim | tuple[typing.Any, ...]) -> _core._Configured: ...
    @property
    def program(self) -> Program | None: ...
    # The compiled _Kernel's properties, typed more precisely than the generated stub can (None for kernels
    # from files).
    @property
    def signature(self) -> Signature | None: ...
    @property
    def resources(self) -> Resources | None: ...
    @property
    def attributes(self) -> dict[str, int]: ...
    @property
    def num_regs(self) -> int: ...
    @property
    def max_threads_per_block(self) -> int: ...
    @property
    def shared_size_bytes(self) -> int: ...
    @property
    def const_size_bytes(self) -> int: ...
    @property
    def local_size_bytes(self) -> int: ...
    @property
    def ptx_version(self) -> int: ...
    @property
    def binary_version(self) -> int: ...
    @property
    def max_dynamic_shared_size_bytes(self) -> int: ...

class RawModule:
    def __init__(
        self,
        code: str | bytes | None = ...,
        path: str | os.PathLike[str] | None = ...,
        options: collections.abc.Sequence[str] = ...,
        name_expressions: collections.abc.Sequence[str] | None = ...,
        *,
        headers: collections.abc.Mapping[str, str | bytes] | None = ...,
        include_paths: collections.abc.Sequence[str | os.PathLike[str]] = ...,
        arch: str | collections.abc.Sequence[str] | None = ...,
        program_name: str = ...,
        check_args: bool = ...,
    ) -> None: ...
    @property
    def program(self) -> Program | None: ...
    @classmethod
    def from_program(cls, program: Program) -> RawModule: ...
    def kernel_names(self) -> list[str]: ...
    def get_function(self, name: str) -> RawKernel: ...
    def get_global(self, name: str) -> ArrayView: ...
