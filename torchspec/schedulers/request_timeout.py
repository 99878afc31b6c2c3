"""How long one request to a scheduler's engine may go unanswered, and the error when it does.

Every command that asks an engine (``status``, ``list``, ``logs``,
``cancel``, ``describe``, ``submit``, each of ``wait``'s polls) sends it
requests; an engine that accepts the connection and then says nothing (hung,
swamped, a half-dead load balancer in front of it) would hold the command for
ever, since the SDKs wait without limit by default (Ray's job client,
Kubernetes' client) or for minutes.  So each backend bounds every request by
one number, the same on every backend:

- the scheduler parameter ``request_timeout``, which the Runner reads from
  ``$TORCHSPEC_REQUEST_TIMEOUT`` (every ``TORCHSPEC_*`` variable is one) and
  which reaches every command, ``status`` of a handle included;
- over it, the run option ``request_timeout`` where a command takes ``-c``
  (``submit``, ``list -c``), or ``[scheduler.NAME]`` in a config file;
- else :data:`DEFAULT_S`.

Streams meant to last (``logs -f``, Kubernetes watches, Docker's events) are
not requests: each backend gives them their own deadline or reconnects.
"""

from __future__ import annotations

import sys
from typing import Any, List, Mapping, Optional, Type

from torchspec.errors import RequestTimeoutError, UsageError
from torchspec.specs import runopts

#: Seconds one request may take.  Far above what a healthy engine needs (tens of milliseconds; a Ray dashboard
#: listing thousands of jobs, or an API server behind a webhook, a few seconds), as Ray's own State API's
#: default; low enough that a script of a few commands against a hung engine fails in a minute, not an hour.
DEFAULT_S = 30
#: The scheduler parameter (and run option) that sets it; the Runner fills it from ``TORCHSPEC_REQUEST_TIMEOUT``.
OPTION = "request_timeout"
ENV = "TORCHSPEC_REQUEST_TIMEOUT"


def add_option(opts: runopts) -> None:
    """Declare the run option ``request_timeout`` in a backend's ``runopts`` (each declares it the same way)."""
    opts.add(OPTION, type_=int, default=None,
             help=f"seconds one request to the engine may go unanswered before the command fails (exit 6);"
                  f" commands without -c read ${ENV} (default: {DEFAULT_S})")


def seconds(given: Any, source: str = f"${ENV}") -> float:
    """The request timeout ``given`` means (``None``: the default); a UsageError naming ``source`` for anything
    other than a number of seconds above 0 (``TORCHSPEC_REQUEST_TIMEOUT=ten`` must not mean "no limit")."""
    if given is None or given == "":
        return float(DEFAULT_S)
    try:
        value = float(given)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{source}={given!r} is not a number of seconds above 0",
                         f"e.g. {ENV}=60, or leave it unset for {DEFAULT_S} s")
    return value


def for_cfg(cfg: Optional[Mapping[str, Any]], fallback: float) -> float:
    """The run option's value where a cfg gives one, else ``fallback`` (the scheduler's)."""
    given = (cfg or {}).get(OPTION)
    return fallback if given is None else seconds(given, f"run option {OPTION}")


def is_timeout(e: BaseException) -> bool:
    """Whether ``e``, or an error it was raised from or wraps (an SDK's own exception around ``requests``' or
    ``urllib3``'s, urllib3's retries around the last one), is a request that got no answer in time.

    The HTTP libraries' timeout types are looked up among the modules already imported: an error of theirs
    means they are, and torchspec imports neither itself."""
    kinds: List[Type[BaseException]] = [TimeoutError]  # socket.timeout too
    for module, name in (("requests.exceptions", "Timeout"), ("urllib3.exceptions", "TimeoutError")):
        found = getattr(sys.modules.get(module), name, None)
        if isinstance(found, type):
            kinds.append(found)
    # urllib3's error for a connection refused (or a name not found) is a ConnectTimeoutError, for old callers
    refused = getattr(sys.modules.get("urllib3.exceptions"), "NewConnectionError", None)
    seen: List[BaseException] = []
    todo: List[Optional[BaseException]] = [e]
    while todo:
        current = todo.pop()
        if current is None or any(current is s for s in seen):
            continue
        if isinstance(current, tuple(kinds)) and not (isinstance(refused, type) and isinstance(current, refused)):
            return True
        seen.append(current)
        reason = getattr(current, "reason", None)
        todo += [current.__cause__, current.__context__, reason if isinstance(reason, BaseException) else None]
    return False


def timed_out(engine: str, address: str, limit: float, what: str, check: str) -> RequestTimeoutError:
    """The error for a request to ``engine`` at ``address`` that got no answer within ``limit`` seconds.

    ``what`` says which request (``listing jobs``), ``check`` how to see whether the engine is up
    (``ray status``, ``scontrol ping``)."""
    return RequestTimeoutError(
        f"{engine} at {address} did not answer within {limit:g}s ({what})",
        f"is it up ({check}), or overloaded? To wait longer for each request, set {ENV}=SECONDS"
        f" (or -c {OPTION}=SECONDS where the command takes -c)",
        engine=engine, address=address, seconds=limit)


__all__ = ["DEFAULT_S", "ENV", "OPTION", "add_option", "for_cfg", "is_timeout", "seconds", "timed_out"]
