"""``torchx.specs.builders``: a component function called with its command line.

``materialize_appdef(fn, ["--lr", "0.1", "--", "--extra"])`` parses the
arguments from ``fn``'s signature (each parameter ``--name``, its annotation
the type, its default the default, ``*args`` after ``--``) and returns the
AppDef ``fn`` gives for them, as TorchX's does.  The parsing is torchspec's
one (:mod:`torchspec.components.python`), so this module sits in the loader
layer, by name, though it is found where TorchX users import it from.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Union

from torchspec.components.python import call_component
from torchspec.specs.api import AppDef

__all__ = ["materialize_appdef"]


def materialize_appdef(cmpnt_fn: Callable[..., Any], cmpnt_args: Union[List[str], Dict[str, Any]],
                       cmpnt_defaults: Optional[Dict[str, str]] = None) -> AppDef:
    """The AppDef ``cmpnt_fn`` returns for ``cmpnt_args`` (its command line; a mapping is read as
    ``--name value`` pairs), ``cmpnt_defaults`` standing in for arguments not given.

    Raises:
        UsageError: an argument the function does not take, or of the wrong type.
        ComponentError: the function's signature is not a component's, it raised, or it returned no AppDef.
    """
    return call_component(getattr(cmpnt_fn, "__name__", "component"), cmpnt_fn, cmpnt_args, cmpnt_defaults)
