"""What every command shares: the config, the store, run references, progress, exit codes.

Only click at module level, so `abtest --help` stays instant.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from abtest.core.config import LoadedConfig
    from abtest.store import Store

EXIT_FAIL, EXIT_BAD_INPUT, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 1, 2, 3, 130
EXIT_CLOSED_PIPE = 128 + 13  # as a process ended by SIGPIPE
EXIT_TERMINATED = 128 + 15   # as a process ended by SIGTERM


def progress(msg: str) -> None:
    click.echo(f"abtest: {msg}", err=True)


def config_path(ctx: click.Context) -> str | None:
    """--config, given before or after the subcommand (both land on the root context)."""
    obj = ctx.find_root().obj
    return (obj or {}).get("config")


def load(ctx: click.Context) -> LoadedConfig:
    from abtest.core.config import load_config

    return load_config(config_path(ctx))


def open_store(ctx: click.Context, read_only: bool = True) -> tuple[LoadedConfig, Store]:
    from abtest.store import Store

    lc = load(ctx)
    return lc, Store(lc.store_path, read_only=read_only, create=False)


def resolve_run(store: Store, ref: str, kind: str | None = None) -> str:
    from abtest.store.runs import resolve_run as resolve

    return resolve(store, ref, kind)


def _remember_config(ctx: click.Context, _param, value):
    if value is not None:
        root = ctx.find_root()
        root.ensure_object(dict)
        root.obj["config"] = value
    return value


def add_config_option(cmd: click.Command) -> None:
    """Let `--config FILE` follow the subcommand too (`abtest report --config x.yaml latest`)."""
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            add_config_option(sub)
        return
    if any(p.name == "config" for p in cmd.params):
        return
    cmd.params.append(click.Option(["--config"], type=click.Path(dir_okay=False), default=None,
                                   expose_value=False, is_eager=True, callback=_remember_config,
                                   help="Config file (default: ./abtest.yaml)."))


def exit_for(exc: BaseException) -> int:
    """Map an error to the exit codes of docs/DESIGN.md, printing one line for it (the
    options it names spelled as flags: `--force`, not the API's `force=True`)."""
    from abtest.errors import IncompleteRunError, UserError

    if isinstance(exc, KeyboardInterrupt):
        from abtest.errors import RunStopped

        if isinstance(exc, RunStopped):
            click.echo(f"abtest: stopped: {exc.line('cli')}", err=True)
            return EXIT_TERMINATED if exc.signal_name == "SIGTERM" else EXIT_INTERRUPTED
        click.echo("abtest: interrupted; finished work is saved (use --resume)", err=True)
        return EXIT_INTERRUPTED
    if isinstance(exc, BrokenPipeError):
        # the reader went away (`abtest report latest | head`): stop quietly, as a unix tool
        # does on SIGPIPE; point stdout at /dev/null so the interpreter's final flush is quiet
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_CLOSED_PIPE
    if isinstance(exc, UserError):
        click.echo(f"abtest: error: {exc.line('cli')}", err=True)
        return EXIT_BAD_INPUT
    if isinstance(exc, IncompleteRunError):
        click.echo(f"abtest: incomplete: {exc.line('cli')}", err=True)
        return EXIT_INCOMPLETE
    click.echo(f"abtest: internal error: {type(exc).__name__}: {exc} "
               "(set ABTEST_DEBUG=1 for a traceback)", err=True)
    return EXIT_FAIL


class OneLineUsageError(click.UsageError):
    """A usage error as every other bad input is shown: one line naming the command and the
    option or argument, exit 2 (click's own form adds a usage block and a help hint)."""

    def show(self, file=None) -> None:
        # the subcommand as typed after `abtest` (the root's own name depends on how it ran)
        where = " ".join(self.ctx.command_path.split()[1:]) if self.ctx else ""
        where = where or "abtest"
        msg = " ".join(self.format_message().split())
        click.echo(f"abtest: error: {where}: {msg} (see --help)", err=True)


def warnings_as_lines(show):
    """A `warnings.showwarning` for while a command runs: abtest's own warnings as one
    `abtest: warning:` line on stderr (no file and line number: they are not a bug), any
    other warning as `show` shows it."""
    from abtest.errors import AbtestWarning

    def shown(message, category, filename, lineno, file=None, line=None) -> None:
        if issubclass(category, AbtestWarning):
            click.echo(f"abtest: warning: {message}", err=True)
        else:
            show(message, category, filename, lineno, file, line)

    return shown


class MappedErrors:
    """Invoke with the exit-code mapping: the main group, and `live`, which tests run alone."""

    def invoke(self, ctx):
        from abtest.errors import quiet_import_warnings

        # before the block below, which restores the filters it found on the way out: litellm
        # may still be loading in the background then
        quiet_import_warnings()
        with warnings.catch_warnings():
            from abtest.errors import AbtestWarning

            warnings.simplefilter("always", AbtestWarning)   # each run's, as it happens
            warnings.showwarning = warnings_as_lines(warnings.showwarning)
            return self._mapped(ctx)

    def _mapped(self, ctx):
        try:
            return super().invoke(ctx)
        except OneLineUsageError:
            raise
        except click.UsageError as exc:  # a subcommand's options: parsed inside this invoke
            raise OneLineUsageError(exc.format_message(), exc.ctx) from None
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except (Exception, KeyboardInterrupt) as exc:
            from abtest.errors import AbtestError

            # a traceback for bugs only: bad input and incomplete work are not bugs
            if os.environ.get("ABTEST_DEBUG") == "1" and not isinstance(
                    exc, (KeyboardInterrupt, AbtestError)):
                raise
            ctx.exit(exit_for(exc))


class Command(MappedErrors, click.Command):
    pass


class Group(MappedErrors, click.Group):
    pass
