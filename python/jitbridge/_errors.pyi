# _errors.pyi — jitbridge's exception classes for type checkers (hand-written from _errors.py).

class CompileError(RuntimeError):
    log: str
    program_name: str
    options: tuple[str, ...]
    kernel: str | None
    file: str | None
    name_expression: int | None
    line: int | None
    column: int | None
    message: str
    source_line: str | None
    def __init__(
        self,
        what: str = ...,
        *,
        log: str = ...,
        program_name: str = ...,
        options: tuple[str, ...] | list[str] = ...,
        kernel: str | None = ...,
        line: int | None = ...,
        column: int | None = ...,
        message: str = ...,
        source_line: str | None = ...,
        file: str | None = ...,
        name_expression: int | None = ...,
    ) -> None: ...

class NvrtcError(RuntimeError): ...
class CudaNotFoundError(NvrtcError): ...

class LinkError(RuntimeError):
    error_log: str
    info_log: str
    undefined: tuple[str, ...]
    input: str | None
    code: int | None
    def __init__(
        self,
        what: str = ...,
        *,
        error_log: str = ...,
        info_log: str = ...,
        undefined: tuple[str, ...] | list[str] = ...,
        input: str | None = ...,
        code: int | None = ...,
    ) -> None: ...

class NoDriverError(RuntimeError): ...

class DriverError(RuntimeError):
    code: int | None
    def __init__(self, what: str = ..., *, code: int | None = ...) -> None: ...

class LaunchError(RuntimeError):
    code: int | None
    def __init__(self, what: str = ..., *, code: int | None = ...) -> None: ...
