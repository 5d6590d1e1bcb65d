"""The project's one error type for bad input (imports nothing).

`SpecdecError` is raised for what the user can fix: an option value or combination the
library refuses, a file or folder that is missing, corrupt or of the wrong kind. The command
line prints it as one line (exit status 1; usage errors found before any work are click's,
exit status 2). Any other exception is a bug and shows its traceback. It subclasses
ValueError, so callers that catch ValueError for bad values keep working.
"""
from __future__ import annotations


class SpecdecError(ValueError):
    """Bad input the user can fix; the message is one line that names what is wrong."""


class Terminated(BaseException):
    """SIGTERM, raised where the command is so that its cleanups run (not an Exception: nothing
    catches it on the way but `finally` and `except BaseException` blocks); exit status 143."""
