"""The language server (``torchspec lsp``): a front end beside the CLI, for editors.

It needs the ``lsp`` extra (pygls); nothing imports this package but the
``lsp`` command, so the rest of torchspec never pays for it.  The protocol
glue is :mod:`torchspec.lsp.server`; the other modules answer in plain terms
from the library (lint, the schema, params, macros, components, schedulers).
"""
