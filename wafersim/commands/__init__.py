"""The ``wafersim`` subcommands, one module each, named as the command, and what they share:
the command table (``jobs``), the parser and its common options, progress lines and text."""
