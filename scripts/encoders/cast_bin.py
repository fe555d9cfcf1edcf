"""A `pytorch_model.bin` with its float tensors stored in another precision, as many published
checkpoints are (float16, bfloat16) or a few (float64), made from one in float32 without torch:
the tests read `data/encoders/bert-bin-*` to check that every precision is read as float32.

    python3 scripts/encoders/cast_bin.py data/encoders/bert-bin/pytorch_model.bin float16 \
        data/encoders/bert-bin-f16/pytorch_model.bin

torch writes a zip of a pickle (protocol 2) naming each tensor's storage by type and key, and
one file of raw little-endian values per storage. The storages of `FloatStorage` are rewritten
value by value and the type's name in the pickle replaced; integer storages are left.
"""

import argparse
import collections
import pickle
import struct
import zipfile

# torch's storage name and how one float32 value is written in each precision.
PRECISIONS = {
    "float16": ("HalfStorage", lambda v: struct.pack("<e", v)),
    "bfloat16": ("BFloat16Storage", lambda v: bfloat16(v)),
    "float64": ("DoubleStorage", lambda v: struct.pack("<d", v)),
}


def bfloat16(value: float) -> bytes:
    """The upper half of `value`'s float32 bits, rounded to nearest even."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    bits += 0x7FFF + ((bits >> 16) & 1)
    return struct.pack("<H", (bits >> 16) & 0xFFFF)


class Storages(pickle.Unpickler):
    """Reads which storage key holds which type, building nothing of torch."""

    def __init__(self, file):
        super().__init__(file)
        self.types = {}

    def find_class(self, module, name):
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module == "torch" and name.endswith("Storage"):
            return name
        return lambda *args, **kwargs: None

    def persistent_load(self, pid):
        _, storage_type, key, _location, _numel = pid
        self.types[key] = storage_type


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("precision", choices=sorted(PRECISIONS))
    parser.add_argument("output")
    args = parser.parse_args()
    storage_name, write = PRECISIONS[args.precision]
    with zipfile.ZipFile(args.source) as source, zipfile.ZipFile(args.output, "w") as output:
        pickled = next(n for n in source.namelist() if n.endswith("/data.pkl"))
        storages = Storages(source.open(pickled))
        storages.load()
        data_dir = pickled[: -len("data.pkl")] + "data/"
        for entry in source.infolist():
            data = source.read(entry)
            key = entry.filename.removeprefix(data_dir)
            if entry.filename == pickled:
                data = data.replace(b"torch\nFloatStorage\n", f"torch\n{storage_name}\n".encode())
            elif entry.filename.startswith(data_dir) and storages.types[key] == "FloatStorage":
                values = struct.unpack(f"<{len(data) // 4}f", data)
                data = b"".join(write(v) for v in values)
            output.writestr(entry.filename, data, compress_type=zipfile.ZIP_STORED)


if __name__ == "__main__":
    main()
