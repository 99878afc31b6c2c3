"""Reading a spec file: where files come from, size limits, encoding, and format detection.

Specs arrive in pull requests, so a file is read with a size cap before any
parser sees it, and bytes that are not UTF-8 text are an error with a
position rather than a traceback.

Every file the loader reads (the spec, its params file, the templates it
imports or includes) is read through a :class:`Source`.  :data:`FILES`, the
disk, is the default; ``torchspec diff`` passes one that reads a git commit
(``torchspec.gitops.git.GitSource``), so the old side of a diff, imports and
all, is loaded without checking anything out; the language server puts its
unsaved buffers in front of the disk (:class:`OverlaySource`).
"""

from __future__ import annotations

import os
from typing import Mapping, Protocol

from torchspec.errors import Diagnostic
from torchspec.version import docs_url

#: Larger files are refused before parsing; real specs are a few KiB.  This also bounds every scalar,
#: and (with parsers.MAX_ALIAS_CHARS) the text a document can hold.
MAX_FILE_BYTES = 2 * 1024 * 1024

FORMATS = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}


def detect_format(path: str) -> str:
    """The format named by the file extension; YAML for anything else (YAML reads JSON too)."""
    return FORMATS.get(os.path.splitext(path)[1].lower(), "yaml")


class Source(Protocol):
    """Where the loader reads files from, by absolute path.

    The template sandbox's folder checks use :meth:`realpath`, so a source
    decides what a link is; :meth:`read` raises what ``open`` raises
    (``FileNotFoundError``, ``IsADirectoryError``, other ``OSError``).
    """

    def read(self, path: str, limit: int) -> bytes:
        """At most ``limit`` bytes of the file."""

    def realpath(self, path: str) -> str:
        """``path`` with links resolved, as ``os.path.realpath``."""

    def exists(self, path: str) -> bool:
        """Whether anything (a file, a folder) is at ``path``."""

    def is_file(self, path: str) -> bool:
        """Whether ``path`` is a regular file (never a folder, FIFO or device)."""

    def size(self, path: str) -> int:
        """The file's size in bytes."""

    def stamp(self, path: str) -> object:
        """A value that changes when the file does (cached templates are reloaded then)."""


class FileSource:
    """The disk: the working tree."""

    def read(self, path: str, limit: int) -> bytes:
        with open(path, "rb") as f:
            return f.read(limit)

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def stamp(self, path: str) -> object:
        """Which file it is and when it last changed: its modification time alone misses an edit that keeps
        it (restored by a tool, or within one tick of a coarse clock); its change time is the kernel's own,
        and an editor's atomic save is another file."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


#: The default source: files on disk.
FILES = FileSource()


class OverlaySource:
    """Texts by path (an editor's unsaved buffers) in front of another source.

    Equal overlays over the same source compare equal, so the template
    sandbox cached for them (and the templates it compiled) is reused from
    one keystroke to the next while the buffers stay the same.
    """

    def __init__(self, base: Source, texts: Mapping[str, str]) -> None:
        self.base = base
        self.texts = {base.realpath(path): text.encode("utf-8") for path, text in texts.items()}
        self._key = (base, tuple(sorted(self.texts.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OverlaySource) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def read(self, path: str, limit: int) -> bytes:
        return self.texts[path][:limit] if path in self.texts else self.base.read(path, limit)

    def realpath(self, path: str) -> str:
        return self.base.realpath(path)

    def exists(self, path: str) -> bool:
        return path in self.texts or self.base.exists(path)

    def is_file(self, path: str) -> bool:
        return path in self.texts or self.base.is_file(path)

    def size(self, path: str) -> int:
        return len(self.texts[path]) if path in self.texts else self.base.size(path)

    def stamp(self, path: str) -> object:
        return self.texts[path] if path in self.texts else self.base.stamp(path)


def with_overlays(source: Source, texts: Mapping[str, str]) -> Source:
    """``source`` with ``texts`` (path -> text) read in front of it; ``source`` itself when there are none."""
    return OverlaySource(source, texts) if texts else source


def read_text(path: str, max_bytes: int = MAX_FILE_BYTES,
              source: Source = FILES) -> tuple[str | None, Diagnostic | None]:
    """The file's text, or a diagnostic saying why it cannot be used."""
    try:
        data = source.read(path, max_bytes + 1)
    except IsADirectoryError:
        return None, Diagnostic("TS001", "is a folder, not a spec file", file=path)
    except OSError as e:
        return None, Diagnostic("TS001", f"cannot read the file: {e.strerror or e}", file=path)
    if len(data) > max_bytes:
        return None, too_large(path, max_bytes)
    return decode(data, path)


def too_large(path: str, max_bytes: int) -> Diagnostic:
    """TS002: the file at ``path`` holds more than ``max_bytes`` bytes; the hint names the limit and its docs."""
    return Diagnostic("TS002", f"the file is larger than the limit of {max_bytes} bytes", file=path,
                      hint=f"spec files are a few KiB; split this one (the limit is {MAX_FILE_BYTES // 1024 // 1024} "
                           f"MiB: see Security, {docs_url('security')}; lint takes --max-file-size BYTES)")


_UTF16_32 = [(b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
             (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16")]


def _wide_encoding(data: bytes) -> str | None:
    """UTF-16 or UTF-32 when ``data`` starts like it (a byte-order mark, or ASCII with NUL bytes between), else None."""
    for bom, name in _UTF16_32:
        if data.startswith(bom):
            return name
    head = data[:64]
    if len(head) < 4 or not any(head):
        return None
    if not any(head[1::4] + head[2::4]) and (not any(head[3::4]) or not any(head[0::4])):
        return "UTF-32"
    if not any(head[1::2]) or not any(head[0::2]):
        return "UTF-16"
    return None


def decode(data: bytes, path: str) -> tuple[str | None, Diagnostic | None]:
    """Decode UTF-8 (a BOM is allowed), refusing binary content with the place it starts.

    UTF-16 and UTF-32 (what some Windows editors save) are refused by name,
    rather than as "binary data", so the fix is obvious.
    """
    wide = _wide_encoding(data)
    if wide is not None:
        return None, Diagnostic("TS001", f"the file is {wide} text; spec files must be UTF-8", file=path,
                                line=1, column=1,
                                hint=f"save it as UTF-8, e.g. iconv -f {wide} -t UTF-8 FILE > FILE.utf8")
    nul = data.find(b"\x00")
    if nul >= 0:
        line, col = _position(data, nul)
        return None, Diagnostic(
            "TS001", "the file holds binary data (a NUL byte), not text", file=path, line=line, column=col
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line, col = _position(data, e.start)
        return None, Diagnostic(
            "TS001",
            f"the file is not valid UTF-8 (byte 0x{data[e.start]:02x})",
            file=path,
            line=line,
            column=col,
            hint="save the file as UTF-8",
        )
    return text, None


def _position(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return line, col
