"""String sentinels shared by specs, statuses and schedulers.

They are plain strings rather than ``None`` so that fields keep a single type
(``str``) and the values survive a round trip through YAML, JSON or a
scheduler's own storage unchanged; the literals are the contract, exactly as
TorchX spells them.
"""

from __future__ import annotations

#: The "every scheduler" backend name, used where TorchX uses ``"*"``.
ALL: str = "all"

#: A required string attribute (image, entrypoint...) that nobody has filled in.
MISSING: str = "<MISSING>"

#: An optional string attribute that is deliberately unset.
NONE: str = "<NONE>"

#: An attribute a scheduler could not read back; schedulers may write the literal
#: without importing torchspec.
UNKNOWN: str = "<UNKNOWN>"

__all__ = ["ALL", "MISSING", "NONE", "UNKNOWN"]
