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


class AccessDeniedError(TesseraError, PermissionError):
    """The shared cache refused the token: unknown or revoked (HTTP 401), none where one is needed,
    or a scope that does not allow the call (403). Never a silent miss (CLI: exit 6)."""


class ServiceUnavailableError(TesseraError, ConnectionError):
    """A service that had to answer did not (down, unreachable, no live worker; CLI: exit 7).
    Lookups stay fail-open: a cache that is down is a miss with a TesseraWarning."""


class TesseraWarning(RuntimeWarning):
    """What the CLI prints as "tessera: warning: ...": a cache that did not answer, a shared winner
    that failed its check here, a store path that does not exist, untuned defaults in a bundle."""


__all__ = [
    "TesseraError", "InvalidArgumentError", "ParseError", "VerifyError", "InvalidConfigError", "CompileError",
    "WrongResultError", "NotFoundError", "UnsupportedError", "StoreError", "AccessDeniedError",
    "ServiceUnavailableError", "TesseraWarning",
]
