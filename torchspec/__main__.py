"""``python -m torchspec`` runs the CLI."""

from torchspec.cli.main import program

program()
