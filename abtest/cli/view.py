"""`abtest view`: the local browser over the results store."""

from __future__ import annotations

import click

from abtest.cli.common import load, progress


@click.command("view")
@click.option("--store", "store_path", default=None, type=click.Path(dir_okay=False),
              help="Results store [the config's store].")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="0 picks a free port.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Loopback unless you mean otherwise: another host exposes model output.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
@click.pass_context
def view(ctx, store_path, port, host, open_browser):
    """Browse every run: claims, metrics, cases side by side with claims linked to chunks."""
    from pathlib import Path

    from abtest.errors import UserError
    from abtest.view.app import serve

    path = Path(store_path) if store_path else load(ctx).store_path
    if not path.exists():
        raise UserError("results store not found (run `abtest run` first)", file=str(path))
    if host not in ("127.0.0.1", "localhost", "::1"):
        progress(f"warning: serving on {host}: anyone who can reach it reads every answer and "
                 "chunk in this store")

    def ready(url, _server):
        click.echo(url)
        progress(f"view: serving {path} at {url} (Ctrl-C stops)")
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    try:
        serve(path, host=host, port=port, on_ready=ready)
    except KeyboardInterrupt:
        pass
