"""Reading and writing the safetensors format with numpy alone (no torch, no safetensors package).

A file is an 8-byte little-endian header length, a JSON header mapping each tensor name to its
dtype, shape and byte range, then the raw little-endian bytes. Reads are memory-mapped, so a
checkpoint larger than RAM loads one tensor at a time.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from pathlib import Path

import ml_dtypes
import numpy as np

_DTYPES = {
  "F64": np.dtype("<f8"),
  "F32": np.dtype("<f4"),
  "F16": np.dtype("<f2"),
  "BF16": np.dtype(ml_dtypes.bfloat16),
  "I64": np.dtype("<i8"),
  "I32": np.dtype("<i4"),
  "I16": np.dtype("<i2"),
  "I8": np.dtype("i1"),
  "U8": np.dtype("u1"),
  "BOOL": np.dtype("?"),
}
_NAMES = {v: k for k, v in _DTYPES.items()}
INDEX_FILE = "model.safetensors.index.json"


class SafetensorsDir:
  """Every tensor in a directory's `*.safetensors` files, by name; arrays are read on access."""

  def __init__(self, directory: str | Path):
    self._entries: dict[str, tuple[Path, dict, int]] = {}
    files = sorted(Path(directory).glob("*.safetensors"))
    if not files:
      raise FileNotFoundError(f"no *.safetensors files in {directory}")
    for path in files:
      with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
      header.pop("__metadata__", None)
      for name, info in header.items():
        self._entries[name] = (path, info, 8 + size)

  def keys(self) -> list[str]:
    return list(self._entries)

  def __iter__(self):
    return iter(self._entries)

  def __contains__(self, name: str) -> bool:
    return name in self._entries

  def __getitem__(self, name: str) -> np.ndarray:
    if name not in self._entries:
      raise KeyError(f"tensor {name!r} is not in the checkpoint")
    path, info, base = self._entries[name]
    dtype = _DTYPES[info["dtype"]]
    begin, _ = info["data_offsets"]
    shape = tuple(info["shape"])
    if math.prod(shape) == 0:
      return np.zeros(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=base + begin, shape=shape)


class ShardedWriter:
  """Writes tensors one at a time into files of at most `max_shard_bytes`, as transformers does.

  One file is `model.safetensors`; several are `model-0000i-of-0000n.safetensors` plus the index
  that maps each tensor to its file. Memory holds one shard at most.
  """

  def __init__(self, directory: str | Path, max_shard_bytes: int = 5 * 2**30):
    self.directory = Path(directory)
    self.directory.mkdir(parents=True, exist_ok=True)
    self.max_shard_bytes = max_shard_bytes
    self._pending: dict[str, np.ndarray] = {}
    self._pending_bytes = 0
    self._written: list[tuple[Path, list[str]]] = []

  def add(self, name: str, array: np.ndarray) -> None:
    array = np.ascontiguousarray(array)
    if self._pending and self._pending_bytes + array.nbytes > self.max_shard_bytes:
      self._flush()
    self._pending[name] = array
    self._pending_bytes += array.nbytes

  def close(self) -> list[Path]:
    self._flush()
    count = len(self._written)
    if count == 1:
      final = [self._written[0][0].rename(self.directory / "model.safetensors")]
    else:
      final = [
        path.rename(self.directory / f"model-{i + 1:05d}-of-{count:05d}.safetensors")
        for i, (path, _) in enumerate(self._written)
      ]
      weight_map = {
        n: p.name for p, (_, names) in zip(final, self._written, strict=True) for n in names
      }
      index = {"metadata": {}, "weight_map": weight_map}
      (self.directory / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    return final

  def _flush(self) -> None:
    if not self._pending:
      return
    path = self.directory / f"partial-{len(self._written):05d}.safetensors.tmp"
    write_file(path, self._pending)
    self._written.append((path, list(self._pending)))
    self._pending, self._pending_bytes = {}, 0


def write_file(path: Path, tensors: Mapping[str, np.ndarray]) -> None:
  """One safetensors file holding `tensors` in order."""
  header: dict = {"__metadata__": {"format": "pt"}}
  offset = 0
  for name, array in tensors.items():
    header[name] = {
      "dtype": _NAMES[array.dtype],
      "shape": list(array.shape),
      "data_offsets": [offset, offset + array.nbytes],
    }
    offset += array.nbytes
  blob = json.dumps(header, separators=(",", ":")).encode()
  blob += b" " * (-len(blob) % 8)  # the data starts 8-byte aligned
  with Path(path).open("wb") as f:
    f.write(struct.pack("<Q", len(blob)))
    f.write(blob)
    for array in tensors.values():
      f.write(np.ascontiguousarray(array).tobytes())  # native order: little-endian hosts only
