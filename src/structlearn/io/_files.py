"""Opening text files: plain or gzip (by the ``.gz`` suffix or the magic bytes), UTF-8, any line ending."""
import codecs
import contextlib
import gzip
import io
import os
import zlib

_GZIP_MAGIC = b"\x1f\x8b"


def describe(source):
    """A short name for ``source`` (a path or a file object) to put in error messages."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return getattr(source, "name", None) or f"<{type(source).__name__}>"


def strip_bom(text):
    """``text`` without a leading UTF-8 byte-order mark (U+FEFF), for text streams that were decoded
    elsewhere (a ``StringIO``, standard input in text mode)."""
    return text[1:] if text[:1] == "\ufeff" else text


@contextlib.contextmanager
def open_text(source, mode="r", encoding="utf-8", error=ValueError):
    """Open ``source`` for reading or writing text.

    ``source`` is a path (``.gz`` means gzip; when reading, gzip is also recognised by its magic bytes)
    or an already open file object (text or binary; a binary one is decoded as ``encoding``, and when
    reading gzip is recognised by its magic bytes), which is not closed. Reading
    uses universal newlines, so LF, CRLF and CR files read the same; writing uses LF. When reading UTF-8, a
    byte-order mark at the start (as Windows editors write) is dropped, so that it does not become part of the
    first label or column; a text stream already decoded is the reader's to check (:func:`strip_bom`).

    Raises
    ------
    FileNotFoundError
        If a path to read does not exist (the message names the path).
    error (ValueError by default; a reader passes its format error type)
        Raised while reading: a gzip file that is truncated or corrupt (the message names the file), or
        text that is not in ``encoding`` (the message names the file and, for a path, the line and byte
        offset), so that a reader raises its one error type for every damaged file.
    """
    if mode not in ("r", "w"):
        raise ValueError(f"`mode` must be 'r' or 'w'; got {mode!r}")
    if mode == "r" and encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
        encoding = "utf-8-sig"  # drops a leading byte-order mark, reads the rest as UTF-8
    if not isinstance(source, (str, os.PathLike)):
        if isinstance(source, io.TextIOBase) or hasattr(source, "encoding"):
            yield source
        else:
            # a binary stream (e.g. standard input's buffer): gzip recognised by its magic bytes, as a path's
            gz = mode == "r" and hasattr(source, "peek") and source.peek(2)[:2] == _GZIP_MAGIC
            inner = gzip.GzipFile(fileobj=source, mode="rb") if gz else source
            wrapper = io.TextIOWrapper(inner, encoding=encoding, newline=None if mode == "r" else "\n")
            try:
                with _read_errors(describe(source), gz, encoding, error):
                    yield wrapper
            finally:
                if mode == "w":
                    wrapper.flush()
                wrapper.detach()
        return
    path = os.fspath(source)
    if mode == "r":
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such file: {path!r}")
        # opened once, the magic bytes peeked: a fifo (``<(zcat x.gz)``) cannot be opened a second time
        raw = open(path, "rb")
        try:
            gz = path.endswith(".gz") or raw.peek(2)[:2] == _GZIP_MAGIC
            inner = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw
            fh = io.TextIOWrapper(inner, encoding=encoding, newline=None)
        except BaseException:
            raw.close()
            raise
        with raw, fh, _read_errors(path, gz, encoding, error, path):
            yield fh
        return
    if path.endswith(".gz"):
        fh = gzip.open(path, "wt", encoding=encoding, newline="\n", compresslevel=6)
    else:
        fh = open(path, "w", encoding=encoding, newline="\n")
    with fh:
        yield fh


@contextlib.contextmanager
def _read_errors(name, gz, encoding, error, path=None):
    """While reading: gzip's errors (a truncated or corrupt stream) and a UnicodeDecodeError as ``error``
    naming ``name`` (and, when the file ``path`` can be read again, the line of the undecodable byte)."""
    try:
        yield
    except UnicodeDecodeError as exc:
        where = _undecodable_line(path, gz, encoding) if path is not None else None
        shown = "UTF-8" if codecs.lookup(encoding).name in ("utf-8", "utf-8-sig") else encoding
        at = f", line {where[0]} (byte {where[1]} of the file)" if where else ""
        raise error(f"{name}{at}: not {shown} text ({exc.reason}: {exc.object[exc.start:exc.end]!r})") \
            from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        if not gz:
            raise
        raise error(f"{name}: not a readable gzip file (truncated or corrupt: {exc})") from None


def _undecodable_line(path, gz, encoding):
    """(line, byte offset) of the first byte of file ``path`` that ``encoding`` cannot decode; None when
    the file cannot be read again. Lines are counted as universal newlines count them (LF, CRLF, CR)."""
    try:
        with (gzip.open if gz else open)(path, "rb") as fh:
            data = fh.read()
        data.decode(encoding)
    except UnicodeDecodeError as exc:
        head = data[:exc.start].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return head.count(b"\n") + 1, exc.start
    except (OSError, EOFError, zlib.error):
        return None
    return None
