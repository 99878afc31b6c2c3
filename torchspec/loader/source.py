"""Reading a spec file from disk: size limits, encoding, and format detection.

Specs arrive in pull requests, so a file is read with a size cap before any
parser sees it, and bytes that are not UTF-8 text are an error with a
position rather than a traceback.
"""

from __future__ import annotations

import os

from torchspec.errors import Diagnostic

#: Larger files are refused before parsing; real specs are a few KiB.
MAX_FILE_BYTES = 2 * 1024 * 1024

FORMATS = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}


def detect_format(path: str) -> str:
    """The format named by the file extension; YAML for anything else (YAML reads JSON too)."""
    return FORMATS.get(os.path.splitext(path)[1].lower(), "yaml")


def read_text(path: str, max_bytes: int = MAX_FILE_BYTES) -> tuple[str | None, Diagnostic | None]:
    """The file's text, or a diagnostic saying why it cannot be used."""
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except IsADirectoryError:
        return None, Diagnostic("TS001", "is a folder, not a spec file", file=path)
    except OSError as e:
        return None, Diagnostic("TS001", f"cannot read the file: {e.strerror or e}", file=path)
    if len(data) > max_bytes:
        return None, too_large(path, max_bytes)
    return decode(data, path)


def too_large(path: str, max_bytes: int) -> Diagnostic:
    """TS002: the file at ``path`` holds more than ``max_bytes`` bytes."""
    return Diagnostic("TS002", f"the file is larger than {max_bytes} bytes", file=path,
                      hint="spec files are small; split the file, or raise the limit with --max-file-size")


def decode(data: bytes, path: str) -> tuple[str | None, Diagnostic | None]:
    """Decode UTF-8 (a BOM is allowed), refusing binary content with the place it starts."""
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
