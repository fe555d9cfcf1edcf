#!/usr/bin/env python3
"""Tags a large text file (one text a line) with nertrain on Ray Data, writing JSON lines.

Each output line is `nertrain tag --format json`'s object for one input line, with that line's
`id` (0-based) first. Sorted by id, the output has the entities `nertrain tag --input FILE
--format json` finds, for a model that reads sentences (a model that reads documents reads each
line as its own document here); a confidence may differ in its last digits, which depend on the
words a process met before. Blank lines are texts too, as they are to `tag --input`.

How the work is spread (Ray Data schedules all of it):
- The file is cut into byte ranges that start at line starts (input splits, as Hadoop cuts
  files); a first pass counts each range's lines, so every line gets its number without the
  file passing through the driver.
- `map_batches` reads each range's lines with their ids, then hands batches of lines to
  `--workers` copies of `TagLines`, a callable class that loads the `Tagger` once per worker.
  Each worker has `--threads` CPUs and `RAYON_NUM_THREADS` set to match, so workers never ask
  for more threads than they were given.
- A file datasink writes the lines, one file per block, under `--output`.

Usage, on a local cluster started by the script:
    pip install "ray[data]" dist/nertrain-*.whl
    scripts/ray_tag.py --model runs/conll --input texts.txt --output tagged --workers 2

On a real cluster, only `--address` changes (`--address auto` on a node of the cluster, or
`ray://HEAD:10001` from outside it). The wheel must be installed on every node, and the
model, input and output paths must be ones every node reads and writes: a shared file system,
or `s3://` and `gs://` paths for the input and output.
Prints one JSON line to stdout: lines, seconds, and lines per second.
"""

import argparse
import json
import os
import sys
import time

import pyarrow.fs
import ray
from ray.data.datasource import BlockBasedFileDatasink

SPLIT_BYTES = 4 << 20


def splits(path, size):
    """Byte ranges of about `size` bytes covering the file, each starting at a line start."""
    filesystem, name = pyarrow.fs.FileSystem.from_uri(path)
    total = filesystem.get_file_info(name).size
    starts = [0]
    with filesystem.open_input_file(name) as file:
        while starts[-1] + size < total:
            file.seek(starts[-1] + size)
            start = total
            while chunk := file.read(1 << 16):
                if (newline := chunk.find(b"\n")) >= 0:
                    start = file.tell() - len(chunk) + newline + 1
                    break
            if start >= total:
                break
            starts.append(start)
    return [{"start": a, "end": b} for a, b in zip(starts, starts[1:] + [total])]


def read_range(path, start, end):
    filesystem, name = pyarrow.fs.FileSystem.from_uri(path)
    with filesystem.open_input_file(name) as file:
        file.seek(start)
        return file.read(end - start)


def count_lines(path):
    def count(batch):
        data = [read_range(path, int(a), int(b)) for a, b in zip(batch["start"], batch["end"])]
        lines = [d.count(b"\n") + (1 if d and not d.endswith(b"\n") else 0) for d in data]
        return {"start": batch["start"], "end": batch["end"], "lines": lines}

    return count


def read_lines(path):
    def read(batch):
        ids, texts = [], []
        for start, end, first in zip(batch["start"], batch["end"], batch["first_id"]):
            lines = read_range(path, int(start), int(end)).decode("utf-8").split("\n")
            if lines[-1] == "":
                lines.pop()
            # As `tag --input` reads lines: "\r\n" ends one too.
            texts += [line[:-1] if line.endswith("\r") else line for line in lines]
            ids += range(int(first), int(first) + len(lines))
        return {"id": ids, "text": texts}

    return read


class TagLines:
    """One worker: loads the model once, then tags batches of numbered lines."""

    def __init__(self, model):
        import nertrain

        self.tagger = nertrain.Tagger(model)

    def __call__(self, batch):
        records = self.tagger.tag([str(text) for text in batch["text"]])
        lines = [
            json.dumps({"id": int(i), **record}, ensure_ascii=False)
            for i, record in zip(batch["id"], records)
        ]
        return {"line": lines}


class JsonLines(BlockBasedFileDatasink):
    """Writes each block's `line` column as it is, one line each."""

    def __init__(self, path):
        super().__init__(path, file_format="jsonl")

    def write_block_to_file(self, block, file):
        for line in block.to_arrow().column("line").to_pylist():
            file.write(line.encode("utf-8") + b"\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a model directory written by fit")
    parser.add_argument("--input", required=True, help="a text file, one text a line")
    parser.add_argument("--output", required=True, help="a directory for the JSON lines")
    parser.add_argument("--workers", type=int, default=1, help="taggers, each a Ray actor")
    parser.add_argument("--threads", type=int, default=1, help="CPUs (threads) per worker")
    parser.add_argument("--batch-size", type=int, default=1000, help="lines a batch")
    parser.add_argument("--address", default=None, help="a Ray cluster (default: start one)")
    args = parser.parse_args()
    for name in ["workers", "threads", "batch_size"]:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: expected at least 1")
    model = os.path.abspath(args.model)
    if not os.path.isfile(os.path.join(model, "model.json")):
        parser.error(f"--model {args.model}: not a model directory (no model.json)")

    # A local cluster counts one CPU more than the taggers take: reading, numbering and writing
    # need one to be scheduled on, or they wait for ever behind the workers (they use little).
    local = {} if args.address else {"num_cpus": args.workers * args.threads + 1}
    ray.init(address=args.address, log_to_driver=False, include_dashboard=False, **local)
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    started = time.perf_counter()
    path = args.input if "://" in args.input else os.path.abspath(args.input)
    counted = ray.data.from_items(splits(path, SPLIT_BYTES)).map_batches(count_lines(path))
    ranges = sorted(counted.take_all(), key=lambda r: r["start"])
    first = 0
    for r in ranges:
        r["first_id"], first = first, first + r["lines"]
    lines = first
    numbered = ray.data.from_items(ranges).map_batches(read_lines(path), batch_size=1)
    tagged = numbered.map_batches(
        TagLines,
        fn_constructor_args=(model,),
        batch_size=args.batch_size,
        compute=ray.data.ActorPoolStrategy(size=args.workers),
        num_cpus=args.threads,
        runtime_env={"env_vars": {"RAYON_NUM_THREADS": str(args.threads)}},
    )
    output = args.output if "://" in args.output else os.path.abspath(args.output)
    tagged.write_datasink(JsonLines(output))
    seconds = time.perf_counter() - started
    json.dump(
        {"lines": lines, "seconds": round(seconds, 3), "lines_per_second": round(lines / seconds)},
        sys.stdout,
    )
    print()


if __name__ == "__main__":
    main()
