"""Tessera's errors as Python exceptions: one class per error category of the C++ library, each
carrying the one-line message the `tessera` CLI prints (``"invalid-config: ..."``). The classes
also derive from the matching built-in (ValueError, LookupError, ...) so generic handlers work."""


class TesseraError(Exception):
    """Any Tessera failure. ``str(e)`` is the CLI's one-line message."""


class InvalidArgumentError(TesseraError, ValueError):
    """Bad input: a shape, a dtype, an array that does not fit the kernel, a bad flag value."""


class ParseError(InvalidArgumentError):
    """The IR text or an elementwise expression could not be parsed."""


class VerifyError(InvalidArgumentError):
    """The kernel is structurally wrong (shape mismatch, dtype clash, ...)."""


class InvalidConfigError(InvalidArgumentError):
    """A config the space rules or the code generator refuse."""


class CompileError(TesseraError):
    """Lowering or code generation failed."""


class WrongResultError(TesseraError):
    """A kernel's output disagreed with the reference evaluator."""


class NotFoundError(TesseraError, LookupError):
    """Nothing stored for that kernel (or nothing to bundle)."""


class UnsupportedError(TesseraError, NotImplementedError):
    """Not possible here, e.g. a GPU target on a machine without its driver."""


class StoreError(TesseraError, OSError):
    """A store or file could not be read or written."""


__all__ = [
    "TesseraError", "InvalidArgumentError", "ParseError", "VerifyError", "InvalidConfigError", "CompileError",
    "WrongResultError", "NotFoundError", "UnsupportedError", "StoreError",
]
