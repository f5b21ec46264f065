"""Read and write IDX files, the format of the MNIST data set (``train-images-idx3-ubyte`` and friends).

An IDX file is a 4-byte magic number -- two zero bytes, a type code and the
number of dimensions -- then one big-endian 32-bit size per dimension, then
the data in row-major order, big-endian.  MNIST's images are type 0x08
(unsigned bytes) with 3 dimensions (count, 28, 28); its labels are type 0x08
with 1 dimension.  Files may be gzip-compressed (``.gz``), as distributed.

The book does not download MNIST: if you have the four files, point
:func:`load_mnist` at their folder.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

# IDX type code -> NumPy dtype (big-endian for the multi-byte types).
IDX_TYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODES = {dtype.newbyteorder(">") if dtype.itemsize > 1 else dtype: code for code, dtype in IDX_TYPES.items()}

MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


class IDXFormatError(ValueError):
    """The bytes are not a well-formed IDX file."""


def _open(path: Path):
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gzipped else open(path, "rb")


def read_idx(path) -> np.ndarray:
    """The array stored in the IDX file ``path`` (gzip-compressed or not), in native byte order."""
    path = Path(path)
    with _open(path) as f:
        data = f.read()
    if len(data) < 4:
        raise IDXFormatError(f"{path}: {len(data)} bytes, too short for an IDX header")
    zero, code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0:
        raise IDXFormatError(f"{path}: the magic number must start with two zero bytes (is this an IDX file?)")
    if code not in IDX_TYPES:
        raise IDXFormatError(f"{path}: unknown IDX type code 0x{code:02x}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IDXFormatError(f"{path}: the header promises {ndim} dimensions but the file ends first")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    dtype = IDX_TYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) - header != expected:
        raise IDXFormatError(
            f"{path}: shape {shape} of {dtype} needs {expected} bytes of data, the file has {len(data) - header}"
        )
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=True)


def write_idx(path, array, compress: bool | None = None) -> Path:
    """Write ``array`` as an IDX file (gzip-compressed when the name ends in .gz, or ``compress``)."""
    path = Path(path)
    array = np.asarray(array)
    big = array.dtype.newbyteorder(">") if array.dtype.itemsize > 1 else array.dtype
    if big not in _CODES:
        raise IDXFormatError(f"IDX has no type for {array.dtype}; use uint8, int8, int16, int32, float32 or float64")
    header = struct.pack(">HBB", 0, _CODES[big], array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + np.ascontiguousarray(array, dtype=big).tobytes()
    if compress is None:
        compress = path.suffix == ".gz"
    with (gzip.open(path, "wb") if compress else open(path, "wb")) as f:
        f.write(payload)
    return path


def find_mnist_file(folder, stem: str) -> Path | None:
    """``folder/stem`` or ``folder/stem.gz`` (or the ``stem.idx3-ubyte`` spelling some mirrors use)."""
    folder = Path(folder)
    candidates = [stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"]
    for name in candidates:
        if (folder / name).is_file():
            return folder / name
    return None


def load_mnist(folder, pad_to: int = 32):
    """MNIST from its four IDX files in ``folder``: ``(X_train, y_train, X_test, y_test)``.

    Images become float32 ``(n, 1, pad_to, pad_to)`` in [0, 1], the 28 x 28
    digit centred with zero borders (LeNet-5 reads 32 x 32 inputs); labels
    int32.  Raises ``FileNotFoundError`` naming the missing files.
    """
    paths = {key: find_mnist_file(folder, stem) for key, stem in MNIST_FILES.items()}
    missing = [MNIST_FILES[key] for key, p in paths.items() if p is None]
    if missing:
        raise FileNotFoundError(f"{folder}: no {', '.join(missing)} (with or without .gz)")
    out = []
    for kind in ("train", "test"):
        images = read_idx(paths[f"{kind}_images"])
        labels = read_idx(paths[f"{kind}_labels"])
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise IDXFormatError(
                f"{kind}: images of shape {images.shape} and labels of shape {labels.shape} do not match"
            )
        out += [pad_images(images, pad_to), labels.astype(np.int32)]
    return out[0], out[1], out[2], out[3]


def pad_images(images, size: int = 32) -> np.ndarray:
    """``(n, h, w)`` uint8 images -> float32 ``(n, 1, size, size)`` in [0, 1], centred on zero borders."""
    images = np.asarray(images)
    n, h, w = images.shape
    if h > size or w > size:
        raise ValueError(f"{h} x {w} images do not fit {size} x {size}")
    out = np.zeros((n, 1, size, size), np.float32)
    top, left = (size - h) // 2, (size - w) // 2
    scale = 255.0 if images.dtype == np.uint8 else 1.0
    out[:, 0, top : top + h, left : left + w] = images / scale
    return out
