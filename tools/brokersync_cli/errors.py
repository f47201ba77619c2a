"""The CLI's own error, in a module of its own.

``main`` catches it, and the command modules that ``main`` imports raise it. Defined in
``main`` itself, it was a second, different class whenever the CLI ran as
``python -m brokersync_cli.main`` (the module is then ``__main__``, and the commands import
``brokersync_cli.main`` again): a usage error escaped as a traceback with exit 1.
"""

from __future__ import annotations


class UsageError(Exception):
    """What the user gave cannot be used (exit 2): a file, a name, a value."""
