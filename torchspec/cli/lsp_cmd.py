"""``torchspec lsp``: start the language server on stdin and stdout (for editors; see docs/guides/editors.md)."""

from __future__ import annotations

import click

from torchspec.exit_codes import ExitCode


@click.command()
@click.option("--stdio", is_flag=True, help="Talk over stdin and stdout (the default and only transport).")
@click.option("--debounce-ms", type=click.IntRange(min=0), default=None, metavar="MS",
              help="Quiet time after an edit before the document is linted again (default 150).")
def lsp(stdio: bool, debounce_ms: int | None) -> int:
    """Run the torchspec language server: live lint, hover, completion, definitions, outline and quick fixes.

    Editors start it themselves (VS Code, Neovim, Helix, Emacs: see https://torchspec.dev/guides/editors/).
    Needs the lsp extra: pip install 'torchspec-cli[lsp]'.
    """
    try:
        from torchspec.lsp.server import DEBOUNCE_MS, serve
    except ImportError as e:
        if not (e.name or "").startswith(("pygls", "lsprotocol", "cattrs", "attrs")):
            raise
        from torchspec.errors import MissingExtraError

        raise MissingExtraError(f"the language server needs {e.name}, which is not installed", "lsp") from None
    serve(DEBOUNCE_MS if debounce_ms is None else debounce_ms)
    return ExitCode.OK
