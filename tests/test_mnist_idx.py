"""IDX reading and writing (kernels/data/mnist_idx.py) on small files the tests write."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from kernels.data import mnist_idx


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("name", ["data.idx", "data.idx.gz"])
def test_round_trip(tmp_path, dtype, name):
    rng = np.random.default_rng(0)
    array = (rng.standard_normal((3, 5, 4)) * 50).astype(dtype)
    path = mnist_idx.write_idx(tmp_path / name, array)
    back = mnist_idx.read_idx(path)
    assert back.dtype == np.dtype(dtype) and back.dtype.isnative
    np.testing.assert_array_equal(back, array)


def test_reads_the_mnist_layout_byte_by_byte(tmp_path):
    """A file written by hand the way the MNIST files are: magic 0x00000803, big-endian sizes."""
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    raw = struct.pack(">IIII", 0x803, 2, 3, 4) + images.tobytes()
    (tmp_path / "imgs").write_bytes(raw)
    np.testing.assert_array_equal(mnist_idx.read_idx(tmp_path / "imgs"), images)
    labels = np.array([7, 2], np.uint8)
    with gzip.open(tmp_path / "labels.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, 2) + labels.tobytes())
    np.testing.assert_array_equal(mnist_idx.read_idx(tmp_path / "labels.gz"), labels)
    # Big-endian multi-byte data.
    ints = np.array([1, -2, 70000], np.int32)
    (tmp_path / "ints").write_bytes(struct.pack(">II", 0x0C01, 3) + ints.astype(">i4").tobytes())
    np.testing.assert_array_equal(mnist_idx.read_idx(tmp_path / "ints"), ints)


@pytest.mark.parametrize("raw, message", [
    (b"\x00\x00", "too short"),
    (b"\x01\x00\x08\x01" + struct.pack(">I", 1) + b"\x00", "two zero bytes"),
    (b"\x00\x00\x07\x01" + struct.pack(">I", 1) + b"\x00", "type code"),
    (b"\x00\x00\x08\x02" + struct.pack(">I", 2), "ends first"),
    (b"\x00\x00\x08\x01" + struct.pack(">I", 5) + b"\x00\x00", "needs 5 bytes"),
])
def test_malformed_files_are_rejected(tmp_path, raw, message):
    (tmp_path / "bad").write_bytes(raw)
    with pytest.raises(mnist_idx.IDXFormatError, match=message):
        mnist_idx.read_idx(tmp_path / "bad")


def test_load_mnist_from_a_small_fake_set(tmp_path):
    rng = np.random.default_rng(1)
    train = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    test = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
    mnist_idx.write_idx(tmp_path / "train-images-idx3-ubyte.gz", train)
    mnist_idx.write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.arange(5, dtype=np.uint8))
    mnist_idx.write_idx(tmp_path / "t10k-images-idx3-ubyte", test)
    mnist_idx.write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.array([9, 8, 7], np.uint8))
    X_train, y_train, X_test, y_test = mnist_idx.load_mnist(tmp_path)
    assert X_train.shape == (5, 1, 32, 32) and X_test.shape == (3, 1, 32, 32)
    assert X_train.dtype == np.float32 and y_train.dtype == np.int32
    np.testing.assert_allclose(X_train[:, 0, 2:30, 2:30], train / 255.0, rtol=1e-6)
    assert X_train[:, :, :2].max() == 0 and X_train[:, :, :, 30:].max() == 0
    np.testing.assert_array_equal(y_test, [9, 8, 7])


def test_load_mnist_names_missing_files(tmp_path):
    mnist_idx.write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((1, 28, 28), np.uint8))
    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte"):
        mnist_idx.load_mnist(tmp_path)
