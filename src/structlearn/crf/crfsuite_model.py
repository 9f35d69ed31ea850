"""CRFsuite's binary model file (``lCRF`` / ``FOMC``, version 100): bytes <-> plain arrays and names.

The layout follows CRFsuite's sources (``lib/crf/src/crf1d_model.c`` for the model chunks,
``lib/cqdb/src/cqdb.c`` for the string databases); this is an independent implementation. All integers
are little-endian uint32, weights little-endian float64::

    header (48 bytes)   "lCRF", file size, "FOMC", version 100, num_features (0 as CRFsuite writes it),
                        num_labels, num_attrs,
                        off_features, off_labels, off_attrs, off_labelrefs, off_attrrefs
    "FEAT" chunk        "FEAT", chunk size, n; n × (type, src, dst, weight): 20 bytes each;
                        type 0 = state (src: attribute id, dst: label id), 1 = transition (src -> dst)
    labels CQDB         label string <-> label id
    attributes CQDB     attribute string <-> attribute id
    "LFRF" chunk        (4-byte aligned) "LFRF", size, L + 2, L + 2 offsets; per label: count, ids of the
                        transition features leaving it
    "AFRF" chunk        (4-byte aligned) "AFRF", size, A, A offsets; per attribute: count, ids of its
                        state features

A CQDB chunk: "CQDB", size, flag, byte-order mark 0x62445371, backward-array length, backward-array
offset; 256 (offset, bucket count) table references; records (int32 id, uint32 key size with the NUL,
key bytes, NUL); the 256 open-addressing hash tables (2 × records buckets of (hash, record offset),
slot (hash >> 8) mod size, linear probing; table hash mod 256); the backward array (record offset per
id). Offsets inside a CQDB are relative to its start. The hash is Bob Jenkins' lookup3 ``hashlittle``
(initval 0) of the key bytes including the NUL.
"""
import struct

import numpy as np

from ..utils.modelfile import ModelFileError

__all__ = ["CRFsuiteModel", "CRFsuiteModelError", "read_crfsuite_model_bytes", "write_crfsuite_model_bytes",
           "hashlittle", "is_crfsuite_model"]

MAGIC = b"lCRF"
MODEL_TYPE = b"FOMC"
VERSION = 100
FT_STATE, FT_TRANS = 0, 1
_CQDB_BOM = 0x62445371
_NUM_TABLES = 256
_CQDB_DATA = 24 + 8 * _NUM_TABLES
_M = 0xFFFFFFFF


class CRFsuiteModelError(ModelFileError):
    """A CRFsuite model file that cannot be read (not ``lCRF``/``FOMC`` version 100, truncated or
    inconsistent); the message names the file. A :class:`~structlearn.utils.modelfile.ModelFileError`, so
    every damaged model file, structlearn's or CRFsuite's, raises that one type."""


class CRFsuiteModel:
    """The content of a CRFsuite model file.

    Attributes
    ----------
    labels : list of str
        Label strings by label id (K).
    attributes : list of str
        Attribute strings by attribute id (A).
    state : ndarray of shape (F, 3)
        Rows (attribute id, label id, weight) — weight as float64 in a float64 array.
    trans : ndarray of shape (T, 3)
        Rows (from label id, to label id, weight).
    """

    def __init__(self, labels, attributes, state, trans):
        self.labels = list(labels)
        self.attributes = list(attributes)
        self.state = np.asarray(state, dtype=np.float64).reshape(-1, 3)
        self.trans = np.asarray(trans, dtype=np.float64).reshape(-1, 3)


def is_crfsuite_model(head):
    """Whether the first bytes ``head`` of a file are CRFsuite's model magic."""
    return bytes(head[:4]) == MAGIC


def _rot(x, k):
    return ((x << k) | (x >> (32 - k))) & _M


def hashlittle(key, initval=0):
    """Bob Jenkins' lookup3 ``hashlittle`` of ``key`` (bytes), as uint32 (CQDB's key hash)."""
    n = len(key)
    a = b = c = (0xDEADBEEF + n + initval) & _M
    i = 0
    while n > 12:
        a = (a + int.from_bytes(key[i:i + 4], "little")) & _M
        b = (b + int.from_bytes(key[i + 4:i + 8], "little")) & _M
        c = (c + int.from_bytes(key[i + 8:i + 12], "little")) & _M
        # mix(a, b, c)
        a = (a - c) & _M; a ^= _rot(c, 4); c = (c + b) & _M        # noqa: E702
        b = (b - a) & _M; b ^= _rot(a, 6); a = (a + c) & _M        # noqa: E702
        c = (c - b) & _M; c ^= _rot(b, 8); b = (b + a) & _M        # noqa: E702
        a = (a - c) & _M; a ^= _rot(c, 16); c = (c + b) & _M       # noqa: E702
        b = (b - a) & _M; b ^= _rot(a, 19); a = (a + c) & _M       # noqa: E702
        c = (c - b) & _M; c ^= _rot(b, 4); b = (b + a) & _M        # noqa: E702
        n -= 12
        i += 12
    if n == 0:
        return c
    tail = key[i:i + n] + b"\0" * (12 - n)  # the last 1..12 bytes, zero-padded words
    a = (a + int.from_bytes(tail[0:4], "little")) & _M
    b = (b + int.from_bytes(tail[4:8], "little")) & _M
    c = (c + int.from_bytes(tail[8:12], "little")) & _M
    # final(a, b, c)
    c ^= b; c = (c - _rot(b, 14)) & _M     # noqa: E702
    a ^= c; a = (a - _rot(c, 11)) & _M     # noqa: E702
    b ^= a; b = (b - _rot(a, 25)) & _M     # noqa: E702
    c ^= b; c = (c - _rot(b, 16)) & _M     # noqa: E702
    a ^= c; a = (a - _rot(c, 4)) & _M      # noqa: E702
    b ^= a; b = (b - _rot(a, 14)) & _M     # noqa: E702
    c ^= b; c = (c - _rot(b, 24)) & _M     # noqa: E702
    return c


# ---------------------------------------------------------------------------------------------------
# CQDB
# ---------------------------------------------------------------------------------------------------
def _cqdb_bytes(strings):
    """A CQDB chunk mapping ``strings[i]`` <-> i."""
    records = bytearray()
    tables = [[] for _ in range(_NUM_TABLES)]
    backward = []
    cur = _CQDB_DATA
    for i, s in enumerate(strings):
        key = s.encode("utf-8") + b"\0"
        hv = hashlittle(key)
        tables[hv % _NUM_TABLES].append((hv, cur))
        backward.append(cur)
        records += struct.pack("<iI", i, len(key)) + key
        cur += 8 + len(key)
    refs = []
    body = bytearray()
    for tab in tables:
        if not tab:
            refs.append((0, 0))
            continue
        n = 2 * len(tab)
        slots = [(0, 0)] * n
        for hv, off in tab:
            k = (hv >> 8) % n
            while slots[k][1] != 0:
                k = (k + 1) % n
            slots[k] = (hv, off)
        refs.append((cur + len(body), n))
        body += b"".join(struct.pack("<II", h, o) for h, o in slots)
    capacity = len(strings)  # the backward array's length, as CRFsuite's writer stores it
    bwd_offset = cur + len(body) if strings else 0
    tail = b"".join(struct.pack("<I", o) for o in backward)
    size = _CQDB_DATA + len(records) + len(body) + len(tail)
    head = struct.pack("<4sIIIII", b"CQDB", size, 0, _CQDB_BOM, capacity, bwd_offset)
    head += b"".join(struct.pack("<II", o, n) for o, n in refs)
    return bytes(head + records + body + tail)


def _cqdb_strings(buf, start, count, what, name="<bytes>"):
    """The ``count`` strings (by id) of the CQDB chunk at ``buf[start:]`` (errors name the file ``name``)."""
    chunk, size, _, bom, bwd_size, bwd_offset = struct.unpack_from("<4sIIIII", buf, start)
    if chunk != b"CQDB" or bom != _CQDB_BOM:
        raise CRFsuiteModelError(f"{name}: the {what} database at offset {start} is not a CQDB chunk (expected "
                         f"b'CQDB' and byte-order mark {_CQDB_BOM:#x}; got {chunk!r}, {bom:#x})")
    out = []
    for i in range(count):
        if not bwd_offset or i >= bwd_size:
            raise CRFsuiteModelError(f"{name}: the {what} database has no entry for id {i} (the header says "
                             f"{count} {what}s; the database holds {bwd_size if bwd_offset else 0})")
        off, = struct.unpack_from("<I", buf, start + bwd_offset + 4 * i)
        _, ksize = struct.unpack_from("<iI", buf, start + off)
        key = bytes(buf[start + off + 8:start + off + 8 + ksize - 1])
        out.append(key.decode("utf-8", errors="surrogateescape"))
    return out


# ---------------------------------------------------------------------------------------------------
# model file
# ---------------------------------------------------------------------------------------------------
def _pad4(buf):
    buf += b"\0" * (-len(buf) % 4)


def _refs_chunk(chunk_id, groups, n_slots):
    """A feature-reference chunk at the (aligned) end of the file so far: ``groups[i]`` lists the
    feature ids of item i; ``n_slots`` ≥ len(groups) offsets (the rest 0). Returns (chunk bytes as a
    function of its start offset)."""
    def build(begin):
        head = 12 + 4 * n_slots
        offsets, body = [], bytearray()
        for g in groups:
            offsets.append(begin + head + len(body))
            body += struct.pack(f"<I{len(g)}I", len(g), *g)
        offsets += [0] * (n_slots - len(groups))
        size = head + len(body)
        return struct.pack(f"<4sII{n_slots}I", chunk_id, size, n_slots, *offsets) + bytes(body)
    return build


def write_crfsuite_model_bytes(model):
    """The bytes of a CRFsuite model file holding ``model`` (a :class:`CRFsuiteModel`).

    As CRFsuite does, features of weight 0 and attributes without a remaining feature are left out
    (attribute ids are renumbered in order of first use). Cost O(size of the model).
    """
    K = len(model.labels)
    state = [(int(a), int(k), float(w)) for a, k, w in model.state if w != 0]
    trans = [(int(i), int(j), float(w)) for i, j, w in model.trans if w != 0]
    for _, _, w in state + trans:
        if not np.isfinite(w):
            raise ValueError(f"a CRFsuite model file cannot hold the weight {w} (only finite weights); "
                             f"forbidden transitions (-inf) have no CRFsuite equivalent")
    amap = {}
    for a, _, _ in state:
        amap.setdefault(a, len(amap))
    features = [(FT_STATE, amap[a], k, w) for a, k, w in state] + [(FT_TRANS, i, j, w) for i, j, w in trans]
    buf = bytearray(48)
    off_features = len(buf)
    buf += struct.pack("<4sII", b"FEAT", 12 + 20 * len(features), len(features))
    for t, s, d, w in features:
        buf += struct.pack("<IIId", t, s, d, w)
    off_labels = len(buf)
    buf += _cqdb_bytes([str(c) for c in model.labels])
    off_attrs = len(buf)
    names = [None] * len(amap)
    for a, b in amap.items():
        names[b] = model.attributes[a]
    buf += _cqdb_bytes(names)
    trans_of = [[] for _ in range(K)]
    attr_of = [[] for _ in range(len(amap))]
    for fid, (t, s, _, _) in enumerate(features):
        (attr_of if t == FT_STATE else trans_of)[s].append(fid)
    _pad4(buf)
    off_labelrefs = len(buf)
    buf += _refs_chunk(b"LFRF", trans_of, K + 2)(off_labelrefs)
    _pad4(buf)
    off_attrrefs = len(buf)
    buf += _refs_chunk(b"AFRF", attr_of, len(amap))(off_attrrefs)
    # num_features stays 0, as CRFsuite writes it (its writer never sets the field; readers ignore it)
    buf[:48] = struct.pack("<4sI4sIIIIIIIII", MAGIC, len(buf), MODEL_TYPE, VERSION, 0, K,
                           len(amap), off_features, off_labels, off_attrs, off_labelrefs, off_attrrefs)
    return bytes(buf)


def read_crfsuite_model_bytes(buf, name="<bytes>"):
    """The :class:`CRFsuiteModel` of the bytes of a CRFsuite model file.

    Raises
    ------
    CRFsuiteModelError (a ModelFileError, a ValueError)
        Not a CRFsuite model (magic, type, version) or a truncated / inconsistent file; the message
        names ``name``. No other error for damaged bytes.
    """
    buf = memoryview(bytes(buf))
    if bytes(buf[:4]) != MAGIC:
        raise CRFsuiteModelError(f"{name}: not a CRFsuite model file (expected the magic 'lCRF', got "
                         f"{bytes(buf[:4])!r})")
    if len(buf) < 48:
        raise CRFsuiteModelError(f"{name}: truncated CRFsuite model file ({len(buf)} bytes; its header alone takes "
                         "48)")
    (_, size, mtype, version, n_feat, K, A, off_f, off_l, off_a, _, off_ar) = struct.unpack_from(
        "<4sI4sIIIIIIIII", buf, 0)
    if mtype != MODEL_TYPE:
        raise CRFsuiteModelError(f"{name}: a CRFsuite model of type {mtype!r}; only linear-chain ('FOMC') "
                         f"models can be read")
    if version != VERSION:
        raise CRFsuiteModelError(f"{name}: CRFsuite model version {version}; version {VERSION} expected")
    if size > len(buf):
        raise CRFsuiteModelError(f"{name}: truncated ({len(buf)} bytes, the header says {size})")
    try:
        chunk, _, n = struct.unpack_from("<4sII", buf, off_f)
        if chunk != b"FEAT":
            raise CRFsuiteModelError(f"{name}: no feature chunk at offset {off_f}")
        if off_f + 12 + 20 * n > len(buf):
            raise CRFsuiteModelError(f"{name}: truncated or corrupt CRFsuite model (the feature chunk at "
                                     f"offset {off_f} claims {n} features, {20 * n} bytes; the file has "
                                     f"{len(buf)} bytes)")
        feats = np.frombuffer(bytes(buf[off_f + 12:off_f + 12 + 20 * n]),
                              dtype=np.dtype([("type", "<u4"), ("src", "<u4"), ("dst", "<u4"),
                                              ("weight", "<f8")]))
        labels = _cqdb_strings(buf, off_l, K, "label", name)
        attributes = _cqdb_strings(buf, off_a, A, "attribute", name)
        chunk, _, n_attr = struct.unpack_from("<4sII", buf, off_ar)
        if chunk != b"AFRF":
            raise CRFsuiteModelError(f"{name}: no attribute-reference chunk at offset {off_ar}")
    except struct.error as exc:
        raise CRFsuiteModelError(f"{name}: truncated or corrupt CRFsuite model ({exc})") from None
    st = feats[feats["type"] == FT_STATE]
    tr = feats[feats["type"] == FT_TRANS]
    if st.size and (st["src"].max() >= A or st["dst"].max() >= K) or \
            tr.size and max(tr["src"].max(), tr["dst"].max()) >= K:
        raise CRFsuiteModelError(f"{name}: a feature refers to a label or attribute id out of range")
    state = np.column_stack([st["src"], st["dst"], st["weight"]]) if st.size else np.zeros((0, 3))
    trans = np.column_stack([tr["src"], tr["dst"], tr["weight"]]) if tr.size else np.zeros((0, 3))
    return CRFsuiteModel(labels, attributes, state, trans)
