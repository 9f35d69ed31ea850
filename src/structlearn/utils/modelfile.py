"""Versioned model files: one ``.npz`` holding numeric arrays and a JSON header; loading runs no code.

Layout: a NumPy ``.npz`` (zip) archive whose member ``__header__`` is a uint8 array of UTF-8 JSON::

    {"magic": "structlearn-model", "format": "linear-chain-crf", "version": 1,
     "estimator": "structlearn.LinearChainCRF", "structlearn_version": "0.1.0",
     "params": {...}, "metadata": {...}, "arrays": ["state_weights", ...]}

and one member per array. Arrays are loaded with ``allow_pickle=False``; object arrays are refused when
saving and cannot be loaded, so a model file never executes code.

This is the container only (it knows no estimator); :func:`structlearn.io.modelfile.load_estimator`
opens any model file by resolving the header's ``format`` to its estimator class.
"""
import errno
import json
import os
import tempfile
import tokenize
import zipfile
import zlib

import numpy as np

__all__ = ["save_model", "load_model", "read_header", "read_magic", "write_atomically", "ModelFileError",
           "HEADER_KEY", "MAGIC"]

HEADER_KEY = "__header__"
MAGIC = "structlearn-model"
_ZIP_ENTRY = b"PK\x03\x04"  # the signature of a zip local file header: an archive's first bytes
_ZIP_EMPTY = b"PK\x05\x06"  # the end-of-central-directory signature: the first bytes of an empty archive


class ModelFileError(ValueError):
    """A model file that cannot be read: truncated, corrupt, of another format or of a newer version, or a
    folder. The one error :func:`load_model` and :func:`read_header` raise for a damaged file (the message
    names the file); the CLI prints it as one line and exits with status 2."""


def _package_version():
    try:
        from .. import __version__
        return __version__
    except ImportError:  # pragma: no cover
        return "unknown"


def save_model(path, *, format_name, version, estimator, params=None, metadata=None, arrays=None):
    """Write a model file.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; ``.npz`` is NOT appended (the name is used as given). Written atomically: into a
        temporary file of a unique name in the same folder (``tempfile.mkstemp``), flushed to disk, then
        renamed over ``path`` (``os.replace``), so a crash never leaves a half-written model under
        ``path``, threads or processes saving the same path at once never collide, and a reader sees the
        old file or the new one, whole. The temporary file is removed on any failure.
    format_name : str
        Format identifier, e.g. ``"linear-chain-crf"``; checked by :func:`load_model`.
    version : int
        Version of that format (>= 1); readers refuse files newer than they support.
    estimator : str
        Qualified name of the class that wrote the file (informative).
    params : dict, optional
        JSON-able hyper-parameters.
    metadata : dict, optional
        JSON-able data such as labels and attribute names.
    arrays : dict str -> ndarray, optional
        Numeric (bool/int/uint/float/complex) or fixed-width string arrays. Names must not start with
        ``__``.

    Raises
    ------
    ValueError
        Non-JSON-able params/metadata, an object-dtype array, a bad array name or version, an empty
        ``path``.
    FileNotFoundError, IsADirectoryError, PermissionError (OSError)
        The folder of ``path`` does not exist, ``path`` is a folder, or the folder is not writable; the
        message names ``path`` (never the temporary file).
    """
    path, folder = _target(path)
    if not isinstance(format_name, str) or not format_name:
        raise ValueError(f"`format_name` must be a non-empty str; got {format_name!r}")
    if isinstance(version, bool) or not isinstance(version, (int, np.integer)) or version < 1:
        raise ValueError(f"`version` must be an int >= 1; got {version!r}")
    arrays = dict(arrays or {})
    stored = {}
    for name, arr in arrays.items():
        if not isinstance(name, str) or not name or name.startswith("__") or "/" in name:
            raise ValueError(f"array name {name!r} is not allowed (non-empty str, no '/', not starting "
                             "with '__')")
        a = np.asarray(arr)
        if a.dtype.hasobject:
            raise ValueError(f"array {name!r} has dtype object, which a model file cannot hold (it would "
                             "need pickle); convert it to a numeric or fixed-width string array")
        stored[name] = a
    header = {"magic": MAGIC, "format": format_name, "version": int(version), "estimator": str(estimator),
              "structlearn_version": _package_version(), "params": params or {}, "metadata": metadata or {},
              "arrays": sorted(stored)}
    try:
        text = json.dumps(header, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`params` and `metadata` must be JSON-able (str, int, finite float, bool, None, "
                         f"lists and dicts with str keys): {exc}") from None
    stored[HEADER_KEY] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    _write_atomically(path, folder, lambda fh: np.savez_compressed(fh, **stored))


def write_atomically(path, data):
    """Write the bytes ``data`` to the model file ``path`` as :func:`save_model` writes (a unique temporary
    file in the same folder, flushed, renamed over ``path``; removed on any failure); returns ``path``.

    Raises
    ------
    ValueError, FileNotFoundError, IsADirectoryError, PermissionError
        As :func:`save_model`: an empty ``path``, a missing folder, a folder as ``path``, a folder that is
        not writable; the message names ``path``.
    """
    target, folder = _target(path)
    _write_atomically(target, folder, lambda fh: fh.write(data))
    return path


def _target(path):
    """(path as str, its folder) of a model file to write; errors name ``path``."""
    path = os.fspath(path)
    if not isinstance(path, str):
        path = os.fsdecode(path)
    if not path:
        raise ValueError("cannot write a model file to '': the path is empty; expected a file name")
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "cannot write a model file there: it is a folder; expected a "
                                "file name", path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"cannot write model file {path!r}: folder {folder!r} does not exist")
    return path, folder


def _write_atomically(path, folder, write):
    """``write(binary file)`` into a fresh temporary file in ``folder``, then rename it to ``path``."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as exc:
        raise _naming(exc, path) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            if hasattr(os, "fchmod"):  # mkstemp's 0600 -> the mode open() would give (0666 less the umask)
                os.fchmod(fh.fileno(), 0o666 & ~_umask())
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        _remove_quietly(tmp)
        raise _naming(exc, path) from None
    except BaseException:
        _remove_quietly(tmp)
        raise


def _naming(exc, path):
    """``exc`` (an OSError about the temporary file) as the same error about ``path``."""
    return type(exc)(exc.errno, f"cannot write model file: {exc.strerror or exc}", path)


def _remove_quietly(path):
    try:
        os.remove(path)
    except OSError:
        pass


def _umask():
    """The process's umask, read without changing it where the system tells it (Linux); otherwise set
    and restored at once."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def load_model(path, expected_format=None, supported_version=None):
    """Read a model file written by :func:`save_model`, without executing any code.

    Parameters
    ----------
    path : str or os.PathLike
    expected_format : str, optional
        Refuse a file whose format differs.
    supported_version : int, optional
        Highest format version this reader understands; refuse newer files.

    Returns
    -------
    header : dict
        ``format``, ``version``, ``estimator``, ``structlearn_version``, ``params``, ``metadata``, ``arrays``.
    arrays : dict str -> ndarray
        Every array named in the header, fully loaded.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    ModelFileError (a ValueError)
        ``path`` is a folder. Truncated or corrupt file (also a zip entry that is encrypted or of an
        unknown compression or version, a damaged .npy array header or magic, a JSON header nested too
        deeply or with entries of the wrong type, an array header claiming more memory than there is), not
        a structlearn model (not a zip archive starting ``PK\x03\x04``, an empty archive, no header), a
        different format, a newer version than ``supported_version``, a header that names missing arrays,
        or an object array. The message names the file. No other error for a damaged file.
    """
    return _read(path, expected_format, supported_version, with_arrays=True)


def read_header(path):
    """The header (dict) of a model file, checked as by :func:`load_model`; the arrays are not read.

    Raises
    ------
    FileNotFoundError, ModelFileError
        As :func:`load_model`.
    """
    return _read(path, None, None, with_arrays=False)[0]


def read_magic(path):
    """The first 4 bytes of the model file ``path`` (``PK\x03\x04`` for structlearn's, ``lCRF`` for
    CRFsuite's).

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    ModelFileError
        ``path`` is a folder (the message names it).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"model file not found: {path!r}")
    if os.path.isdir(path):
        raise ModelFileError(f"{path!r} is a folder, not a model file; expected the path of a file written "
                             "by save")
    try:
        with open(path, "rb") as fh:
            return fh.read(4)
    except IsADirectoryError:  # made a folder since the check
        raise ModelFileError(f"{path!r} is a folder, not a model file") from None


def _read(path, expected_format, supported_version, with_arrays):
    """Header and (with ``with_arrays``) arrays of a model file (see :func:`load_model`)."""
    path = os.fspath(path)
    magic = read_magic(path)
    if magic == b"\x93NUM":
        raise ModelFileError(f"{path!r} holds a single .npy array, not a structlearn model (.npz archive)")
    if magic == _ZIP_EMPTY:
        raise ModelFileError(f"{path!r} is an empty zip archive, not a structlearn model file (expected an "
                             ".npz archive holding a model header and arrays)")
    if magic != _ZIP_ENTRY:  # a zip archive whose first entry is a file: the local file header signature
        raise ModelFileError(f"{path!r} is not a structlearn model file (expected an .npz archive, which "
                             f"starts with {_ZIP_ENTRY!r}; the file starts with {magic!r})")
    try:
        return _read_zip(path, expected_format, supported_version, with_arrays)
    except RecursionError:  # json.loads of a header nested thousands deep (a RuntimeError: first)
        raise ModelFileError(f"{path!r}: the model header is JSON nested too deeply to be a model header; "
                             "the file is corrupt") from None
    except (NotImplementedError, RuntimeError) as exc:  # zipfile's answers to a corrupt entry header: an
        # unknown compression method or zip version (NotImplementedError), the encryption flag set
        raise ModelFileError(f"{path!r} is not a readable model file (a corrupt .npz archive entry; expected "
                             f"an unencrypted zip entry as structlearn writes: {exc})") from None
    except MemoryError:  # NumPy allocates the shape an array header claims before reading the data
        raise ModelFileError(f"{path!r}: not enough memory for the model's arrays (or a corrupt array "
                             "header claims a huge shape)") from None


def _read_zip(path, expected_format, supported_version, with_arrays):
    """:func:`_read` once the file starts as a zip archive."""
    with open(path, "rb") as fh:  # our handle, closed on every error path (np.load's is not)
        try:
            npz = np.load(fh, allow_pickle=False)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
            raise ModelFileError(f"{path!r} is not a readable model file (truncated or corrupt; expected an "
                                 f".npz archive written by structlearn): {exc}") from None
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise ModelFileError(f"{path!r} holds a single .npy array, not a structlearn model (.npz archive)")
        return _read_npz(npz, path, expected_format, supported_version, with_arrays)


def _read_npz(npz, path, expected_format, supported_version, with_arrays):
    """Header and arrays (none without ``with_arrays``) of an opened model archive (see load_model)."""
    with npz:
        try:
            if HEADER_KEY not in npz.files:
                raise ModelFileError(f"{path!r} is an .npz archive but not a structlearn model file (it has "
                                     f"no {HEADER_KEY!r} member; members: {sorted(npz.files)[:10]})")
            raw = _array(npz, HEADER_KEY, path)
            try:
                header = json.loads(raw.tobytes().decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ModelFileError(f"{path!r}: the model header is not valid JSON ({exc}); the file is "
                                     "corrupt") from None
            if not isinstance(header, dict) or header.get("magic") != MAGIC:
                raise ModelFileError(f"{path!r}: the header does not identify a structlearn model file")
            fmt, ver = header.get("format"), header.get("version")
            if expected_format is not None and fmt != expected_format:
                raise ModelFileError(f"{path!r} is a {fmt!r} model file, not {expected_format!r}; load it "
                                     "with the matching estimator")
            if not isinstance(ver, int) or isinstance(ver, bool):
                raise ModelFileError(f"{path!r}: the header has no integer format version (got {ver!r})")
            if supported_version is not None and ver > supported_version:
                raise ModelFileError(f"model file version {ver} is newer than this structlearn (supports "
                                     f"≤ {supported_version}); upgrade structlearn")
            names = header.get("arrays", [])
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise ModelFileError(f"{path!r}: the header's 'arrays' must be a list of names; got "
                                     f"{names!r:.80} (the file is corrupt)")
            for key in ("params", "metadata"):
                if not isinstance(header.get(key, {}), dict):
                    raise ModelFileError(f"{path!r}: the header's {key!r} must be a JSON object; got "
                                         f"{header[key]!r:.80} (the file is corrupt)")
            arrays = {}
            for name in names if with_arrays else ():
                if name not in npz.files:
                    raise ModelFileError(f"{path!r}: the header lists array {name!r} but the file lacks it "
                                         "(the file is corrupt)")
                arrays[name] = _array(npz, name, path)
        except (zipfile.BadZipFile, EOFError, OSError, KeyError, zlib.error) as exc:
            raise ModelFileError(f"{path!r} is truncated or corrupt: {exc}") from None
    return header, arrays


def _array(npz, name, path):
    """Member ``name`` of an opened archive; ModelFileError (naming it) for a truncated or refused one."""
    try:
        value = npz[name]
    except (tokenize.TokenError, SyntaxError) as exc:  # NumPy re-parses a .npy header that is not a Python
        # literal with the tokenizer (for Python 2 files); a damaged one can fail there
        raise ModelFileError(f"{path!r}: array {name!r} has a corrupt .npy header ({exc}); the file is "
                             "corrupt") from None
    except ValueError as exc:  # NumPy's ValueError for short data ("EOF: reading array data, ..."), a
        # malformed .npy header, or an object array (which needs pickle, refused)
        if "pickle" in str(exc):
            raise ModelFileError(f"{path!r}: array {name!r} is an object array, which cannot be loaded "
                                 f"without pickle ({exc}); refusing it") from None
        what = ("truncated (its data is shorter than its header's shape and dtype need)"
                if str(exc).startswith("EOF") else "corrupt (a malformed .npy array header)")
        raise ModelFileError(f"{path!r}: array {name!r} is {what}; the file is corrupt: {exc}") from None
    except OverflowError as exc:  # a shape too large for a C long in the .npy header
        raise ModelFileError(f"{path!r}: array {name!r} has a corrupt .npy header ({exc}); the file is "
                             "corrupt") from None
    if not isinstance(value, np.ndarray):  # NumPy hands back the raw bytes of a member without .npy magic
        raise ModelFileError(f"{path!r}: member {name!r} is not a .npy array (its magic bytes are damaged); "
                             "the file is corrupt")
    return value
