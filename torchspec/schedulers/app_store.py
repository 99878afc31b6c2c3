"""What a backend keeps per app on this machine, so that a later command finds it from the app id alone.

``status``, ``logs``, ``cancel`` and ``describe`` get only an app id; a run
option the app was submitted with (the folder of a queue, the address of a
server) must be found again from it.  :attr:`Scheduler.store
<torchspec.schedulers.api.Scheduler.store>` is one of these per backend::

    $TORCHSPEC_HOME/store/BACKEND/APP_ID.json     # APP_ID %-encoded as one file name

Each record is a JSON object.  A write goes to a temporary file that then
replaces the record (a reader sees the old record or the new one, never half
of one), and :meth:`AppStore.update` holds the backend's lock file while it
reads, changes and writes, so two commands changing one app do not lose
either change.  Records live on this machine only: a backend whose apps are
reached from several machines keeps what they need in the engine (labels, a
job comment) or in the app id instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import urllib.parse
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

from torchspec.errors import StateError
from torchspec.schedulers.state_dir import default_state_dir

#: the folder under the state folder that holds every backend's records
STORE = "store"
_SUFFIX = ".json"


class AppStore:
    """The records of one backend's apps (see the module's docstring)."""

    def __init__(self, backend: str, root: Optional[str] = None, kind: str = STORE) -> None:
        """``root``: the state folder (default ``$TORCHSPEC_HOME``, as every backend's state); ``kind``: the
        folder under it, one per kind of record (torchspec keeps the apps' provenance under ``provenance``)."""
        self.backend = backend
        self.folder = os.path.join(root or default_state_dir(), kind, _file_name(backend))

    def get(self, app_id: str) -> Optional[Dict[str, Any]]:
        """The app's record; None where none was kept (another machine submitted it, or it was removed)."""
        try:
            with open(self._path(app_id), encoding="utf-8") as f:
                return json.load(f)  # type: ignore[no-any-return]
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise StateError(f"cannot read what the {self.backend} scheduler kept of app {app_id!r}"
                             f" ({self._path(app_id)}): {e}") from None

    def put(self, app_id: str, record: Mapping[str, Any]) -> None:
        """Keep ``record`` (JSON: strings, numbers, booleans, None, lists, mappings) as the app's whole record."""
        with self._locked():
            self._write(app_id, record)

    def update(self, app_id: str, change: Callable[[Dict[str, Any]], Optional[Mapping[str, Any]]]
               ) -> Dict[str, Any]:
        """Read the record ({} where none), let ``change`` edit it in place (or return a new one), write it
        back, all under the lock; returns what was written."""
        with self._locked():
            record = self.get(app_id) or {}
            record = dict(change(record) or record)
            self._write(app_id, record)
            return record

    def remove(self, app_id: str) -> None:
        """Forget the app; nothing happens where nothing was kept."""
        with self._locked(), contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(app_id))

    def app_ids(self) -> List[str]:
        """Every app with a record, sorted."""
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return []
        return sorted(urllib.parse.unquote(n[:-len(_SUFFIX)]) for n in names if n.endswith(_SUFFIX))

    # -- inside --------------------------------------------------------------------------

    def _path(self, app_id: str) -> str:
        return os.path.join(self.folder, _file_name(app_id) + _SUFFIX)

    def _write(self, app_id: str, record: Mapping[str, Any]) -> None:
        try:
            text = json.dumps(record, indent=1, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise TypeError(f"a record of the {self.backend} scheduler must be JSON: {e}") from None
        fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, self._path(app_id))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            os.makedirs(self.folder, exist_ok=True)
            lock = os.open(os.path.join(self.folder, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise StateError(f"cannot keep the {self.backend} scheduler's records in {self.folder}: {e.strerror or e}",
                             "check the folder (or point TORCHSPEC_HOME at another one)") from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
        finally:
            os.close(lock)


def _file_name(word: str) -> str:
    """``word`` as one file name: every character but letters, digits and ``_.-`` %-encoded (``ns:app`` is
    ``ns%3Aapp``), and a leading dot too, so no record is hidden or named ``..``."""
    name = urllib.parse.quote(word, safe="")
    return "%2E" + name[1:] if name.startswith(".") else name
