"""Exceptions that reach the user. The CLI prints ``str(error)`` as one line and exits 2."""


class WaferSimError(Exception):
    """Base of every error wafersim raises on purpose."""


class ConfigError(WaferSimError, ValueError):
    """Bad input: an unknown key, a wrong type, or a value out of its allowed range."""


class DefectMapError(WaferSimError):
    """A defect map that is malformed, or a file that is not a defect map."""


class ConnectivityError(WaferSimError):
    """Working PEs that cannot reach each other through working PEs and links."""


class DeadlockError(WaferSimError):
    """A simulation that stopped making progress while work was pending."""
