"""The `specdec` command line: a thin click group whose commands load lazily.

Each command lives in its own module and is imported only when invoked, so
`specdec plan` never imports torch. The project's own error for bad input (`SpecdecError`: a
value the library refuses, a corrupt or unusable file) and a missing, unreadable or clashing
file or folder become a one-line `Error: ...` and exit status 1; usage errors a one-line
`Error: Invalid value for '--option': ...` and exit status 2 (under torchrun, said by rank 0
alone). Anything else is a bug and shows its traceback; SPECDEC_DEBUG=1 shows the traceback of
an input error too. SIGTERM unwinds the command as Ctrl-C does (every scratch file and folder
is removed on the way out; nothing published is touched) and exits 143.
"""
from __future__ import annotations

import errno
import importlib
import importlib.util
import os
import signal
import sys
import threading

import click

from specdec.errors import SpecdecError, Terminated

# command name -> "module:attribute"
COMMANDS: dict[str, str] = {
    "plan": "specdec.cli.plan:plan",
    "plan-trees": "specdec.cli.plan:plan_trees_command",
    "figures": "specdec.cli.figures:figures",
    "decode": "specdec.cli.decode:decode",
    "ngram": "specdec.cli.ngram:ngram",
    "estimate": "specdec.cli.estimate:estimate",
    "validate": "specdec.cli.validate:validate",
    "bild": "specdec.cli.bild:bild",
    "heads": "specdec.cli.heads:heads",
    "eagle": "specdec.cli.eagle:eagle",
    "draft": "specdec.cli.draft:draft",
    "serve-bench": "specdec.cli.serve:serve_bench",
    "costs": "specdec.cli.costs:costs",
    "llamacpp": "specdec.cli.llamacpp:llamacpp",
}

# Bad input, shown as one line: the project's own error, and the file errors of paths the user named.
USER_ERRORS: tuple[type[BaseException], ...] = (SpecdecError, FileNotFoundError, FileExistsError, NotADirectoryError,
                                                IsADirectoryError, PermissionError)


# Writing failed for a reason of the place written to, not of specdec: said in one line.
WRITE_ERRNOS = frozenset(getattr(errno, name) for name in ("ENOSPC", "EROFS", "EACCES", "EPERM", "EDQUOT", "EFBIG",
                                                           "ENAMETOOLONG") if hasattr(errno, name))


class LazyGroup(click.Group):
    """A click group that imports a command's module only when the command runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(c for c in COMMANDS if _available(c))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name].split(":")
        return getattr(importlib.import_module(module), attr)


def _available(name: str) -> bool:
    return importlib.util.find_spec(COMMANDS[name].split(":")[0]) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="specdec")
def cli() -> None:
    """Plan, measure and check speculative decoding (Leviathan et al., ICML 2023)."""


FINALIZER_RETRY_S = 0.05  # a SIGTERM that landed in a finalizer is sent again this much later


def _terminate(signum, frame) -> None:
    raise Terminated


def _unraisable(previous):
    """A `sys.unraisablehook` for the command: Terminated raised where Python cannot propagate it (a
    `__del__`, a weakref callback: it would print the exception and drop the SIGTERM) sends the
    signal again once that finalizer has returned; anything else goes to `previous`."""
    def hook(unraisable) -> None:
        if isinstance(unraisable.exc_value, Terminated):
            again = threading.Timer(FINALIZER_RETRY_S, os.kill, (os.getpid(), signal.SIGTERM))
            again.daemon = True
            again.start()
            return
        previous(unraisable)
    return hook


ARGV: list[str] = []  # this invocation's arguments, for a command that relaunches itself (estimate --processes)


def _exiting(main_thread: bool) -> None:
    """The exit for a signal is under way: a second SIGINT or SIGTERM (a rank of `estimate
    --processes` gets one from its launcher and one from torch's agent) must not raise again inside
    the interpreter's exit handlers, where it prints a traceback."""
    if main_thread:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the group, turning library errors into one-line messages."""
    ARGV[:] = sys.argv[1:] if argv is None else argv
    main_thread = threading.current_thread() is threading.main_thread()  # signals can be set there only
    if os.environ.get("SPECDEC_LAUNCHER"):  # a rank of `estimate --processes`: it dies with its launcher
        from specdec.reference.distributed.launch import die_with_launcher
        die_with_launcher()
    from specdec.paths import cache_problem

    if problem := cache_problem():  # before any command reads or converts a model into it
        click.echo(f"Error: {problem}", err=True)
        sys.exit(2)
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    previous_hook, sys.unraisablehook = sys.unraisablehook, _unraisable(sys.unraisablehook)
    try:
        cli.main(args=argv, prog_name="specdec", standalone_mode=False)
    except Terminated:
        _exiting(main_thread)
        click.echo("Terminated.", err=True)
        sys.exit(143)
    except click.exceptions.Abort as exc:  # Ctrl-C (click turns KeyboardInterrupt into Abort): 130, as a shell says
        _exiting(main_thread)
        interrupted = isinstance(exc.__cause__, KeyboardInterrupt)
        click.echo("Interrupted." if interrupted else "Aborted.", err=True)
        sys.exit(130 if interrupted else 1)
    except click.exceptions.NoArgsIsHelpError as exc:  # a bare `specdec` (or group): its help, as --help shows it
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        sys.exit(0)
    except click.UsageError as exc:  # one line naming the option, status 2 (no usage banner)
        if os.environ.get("RANK", "0") in ("", "0"):  # under torchrun every rank finds it: rank 0 says it
            click.echo(f"Error: {_one_line(exc.format_message())}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except USER_ERRORS as exc:
        if os.environ.get("SPECDEC_DEBUG"):
            raise
        click.echo(f"Error: {_one_line(str(exc))}", err=True)
        sys.exit(1)
    except OSError as exc:  # a full disk, a read-only folder: one line, status 2 (the place the user named
        # cannot take the output, as an --out refused up front); anything else is a bug
        if exc.errno not in WRITE_ERRNOS or os.environ.get("SPECDEC_DEBUG"):
            raise
        click.echo(f"Error: cannot write {exc.filename or 'the output'}: {exc.strerror}; nothing was published",
                   err=True)
        sys.exit(2)
    finally:
        sys.unraisablehook = previous_hook
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _one_line(message: str) -> str:
    return " ".join(message.split())


if __name__ == "__main__":
    main()
