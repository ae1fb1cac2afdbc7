"""Store model-golden stages losslessly in half the space: every F32 tensor whose values are all exactly
representable in bf16 (the low 16 bits of each float are zero — stages captured from a bf16 model) is
rewritten as BF16 holding the same values. The oracle does the same when it writes a golden
(common.compact_bf16), so this only converts goldens written before it did.

Usage (numpy + stdlib; no torch needed): python3 tools/reference/compact_stages.py FILE.safetensors...
Prints, per file, how many tensors were converted; verifies the values round-trip before replacing the file.
"""
import json
import struct
import sys

import numpy as np


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", None)
    body = memoryview(b)[8 + n:]
    tensors = {}
    for name, v in header.items():
        s, e = v["data_offsets"]
        tensors[name] = (v["dtype"], v["shape"], bytes(body[s:e]))
    return meta, tensors


def write(path, meta, tensors):
    header = {}
    if meta is not None:
        header["__metadata__"] = meta
    off = 0
    order = sorted(tensors)
    for name in order:
        dt, shape, data = tensors[name]
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name in order:
            f.write(tensors[name][2])


def to_f32(dt, data):
    if dt == "F32":
        return np.frombuffer(data, np.float32)
    if dt == "BF16":
        return (np.frombuffer(data, np.uint16).astype(np.uint32) << 16).view(np.float32)
    return None


def main():
    for path in sys.argv[1:]:
        meta, tensors = read(path)
        out, n_conv = {}, 0
        for name, (dt, shape, data) in tensors.items():
            if dt == "F32":
                u = np.frombuffer(data, np.uint32)
                if u.size and not (u & 0xFFFF).any():
                    out[name] = ("BF16", shape, (u >> 16).astype(np.uint16).tobytes())
                    n_conv += 1
                    continue
            out[name] = (dt, shape, data)
        for name, (dt, shape, data) in tensors.items():  # lossless: every value round-trips bit for bit
            a, b = to_f32(dt, data), to_f32(out[name][0], out[name][2])
            if a is not None:
                assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), name
            else:
                assert data == out[name][2], name
        if n_conv:
            write(path, meta, out)
        print(f"{path}: {n_conv}/{len(tensors)} tensors stored as BF16")


if __name__ == "__main__":
    main()
