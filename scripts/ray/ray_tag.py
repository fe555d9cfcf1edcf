#!/usr/bin/env python3
"""Tags a large text file (one text a line) with nertrain on Ray Data, writing JSON lines.

Each output line is `nertrain tag --format json`'s object for one input line, with that line's
`id` (0-based) first. Sorted by id, the output has the entities `nertrain tag --input FILE
--format json` finds; a confidence may differ in its last digits, which depend on the words a
process met before. Blank lines are texts too, as they are to `tag --input`.

For a model that reads documents, lines up to a blank one are one document, as `tag --input`
reads them: input splits start at blank lines, and whole documents go to the taggers. A file
without blank lines is one document, which both read in pieces (`tag --input` every 8,000 lines
of a chunk, Ray at its input splits): entities near the cuts may differ. Put a blank line
between documents.

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
    scripts/ray/ray_tag.py --model runs/conll --input texts.txt --output tagged --workers 2

A model with dictionary features reads the dictionary stored with it, as `tag` does;
`--dictionary FILE` (repeatable) extends it for the labels it has, or replaces their entries with
`--replace-dictionary`, as `tag --dictionary` does. The files are read on the driver first, so that
a bad line or an unknown label stops the run before any work is scheduled, then by each worker.

On a real cluster, only `--address` changes (`--address auto` on a node of the cluster, or
`ray://HEAD:10001` from outside it). The wheel must be installed on every node, and the
model, dictionary, input and output paths must be ones every node reads and writes: a shared file system,
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


def next_line(file, at):
    """Where the line after the one holding byte `at` starts, and that line (None at the end)."""
    file.seek(at)
    pending = b""
    while chunk := file.read(1 << 16):
        pending += chunk
        if (newline := pending.find(b"\n")) >= 0:
            start = at + newline + 1
            file.seek(start)
            line = b""
            while (chunk := file.read(1 << 16)) and b"\n" not in chunk:
                line += chunk
            line += chunk.split(b"\n", 1)[0] if chunk else b""
            return start, line
    return None, None


def splits(path, size, documents):
    """Byte ranges of about `size` bytes covering the file, each starting at a line start; with
    `documents`, at a blank line, so that no document is cut."""
    filesystem, name = pyarrow.fs.FileSystem.from_uri(path)
    total = filesystem.get_file_info(name).size
    starts = [0]
    with filesystem.open_input_file(name) as file:
        while starts[-1] + size < total:
            start, line = next_line(file, starts[-1] + size - 1)
            while documents and start is not None and line.strip():
                start, line = next_line(file, start)
            if start is None or start >= total:
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


def documents_of(lines):
    """A file's lines as documents, as `tag --input` reads them (`nertrain.line_documents`):
    as (first line's index, lines)."""
    import nertrain

    return [(start, lines[start:end]) for start, end in nertrain.line_documents(lines)]


def read_lines(path, documents):
    """Each range's numbered lines: a row a line, or with `documents`, a row a document."""

    def read(batch):
        ids, texts = [], []
        for start, end, first in zip(batch["start"], batch["end"], batch["first_id"]):
            lines = read_range(path, int(start), int(end)).decode("utf-8").split("\n")
            if lines[-1] == "":
                lines.pop()
            # As `tag --input` reads lines: "\r\n" ends one too.
            lines = [line[:-1] if line.endswith("\r") else line for line in lines]
            if documents:
                for at, document in documents_of(lines):
                    ids.append(int(first) + at)
                    texts.append(document)
            else:
                texts += lines
                ids += range(int(first), int(first) + len(lines))
        return {"id": ids, "text": texts}

    return read


class TagLines:
    """One worker: loads the model once, then tags batches of numbered lines, or of documents
    (a row's `id` is its first line's, its `text` its lines)."""

    def __init__(self, model, documents, dictionaries, replace_dictionary):
        import nertrain

        self.tagger = nertrain.Tagger(
            model, dictionaries=dictionaries, replace_dictionary=replace_dictionary
        )
        self.documents = documents

    def __call__(self, batch):
        if self.documents:
            ids, texts = [], []
            for first, lines in zip(batch["id"], batch["text"]):
                ids += range(int(first), int(first) + len(lines))
                texts += [str(line) for line in lines]
            records = self.tagger.tag(texts, lines=True)
        else:
            ids = batch["id"]
            records = self.tagger.tag([str(text) for text in batch["text"]])
        lines = [
            json.dumps({"id": int(i), **record}, ensure_ascii=False)
            for i, record in zip(ids, records)
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
    parser.add_argument(
        "--batch-size", type=int, default=1000, help="lines a batch (documents, for a model that reads them)"
    )
    parser.add_argument("--address", default=None, help="a Ray cluster (default: start one)")
    parser.add_argument(
        "--split-bytes", type=int, default=SPLIT_BYTES, help="bytes of the file an input split reads"
    )
    parser.add_argument(
        "--dictionary",
        action="append",
        default=[],
        metavar="FILE",
        help="a dictionary file (LABEL<TAB>phrase lines) extending the model's (repeatable)",
    )
    parser.add_argument(
        "--replace-dictionary",
        action="store_true",
        help="the --dictionary files replace the model's entries of their labels",
    )
    args = parser.parse_args()
    if args.replace_dictionary and not args.dictionary:
        parser.error("--replace-dictionary: expected at least one --dictionary FILE")
    for name in ["workers", "threads", "batch_size", "split_bytes"]:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: expected at least 1")
    model = os.path.abspath(args.model)
    if not os.path.isfile(os.path.join(model, "model.json")):
        parser.error(f"--model {args.model}: not a model directory (no model.json)")
    dictionaries = [os.path.abspath(path) for path in args.dictionary]
    import nertrain

    try:
        tagger = nertrain.Tagger(
            model, threads=1, dictionaries=dictionaries, replace_dictionary=args.replace_dictionary
        )
    except (ValueError, OSError) as error:
        parser.error(str(error))
    if tagger.feature_columns:
        parser.error(
            f"--model {args.model}: reads feature columns {tagger.feature_columns} beside the words; "
            "raw text has none (score or tag its CoNLL files with `nertrain eval` or `tag --columns`)"
        )
    documents = tagger.reads_documents

    # A local cluster counts one CPU more than the taggers take: reading, numbering and writing
    # need one to be scheduled on, or they wait for ever behind the workers (they use little).
    local = {} if args.address else {"num_cpus": args.workers * args.threads + 1}
    ray.init(address=args.address, log_to_driver=False, include_dashboard=False, **local)
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    started = time.perf_counter()
    path = args.input if "://" in args.input else os.path.abspath(args.input)
    counted = ray.data.from_items(splits(path, args.split_bytes, documents)).map_batches(
        count_lines(path)
    )
    ranges = sorted(counted.take_all(), key=lambda r: r["start"])
    first = 0
    for r in ranges:
        r["first_id"], first = first, first + r["lines"]
    lines = first
    numbered = ray.data.from_items(ranges).map_batches(read_lines(path, documents), batch_size=1)
    tagged = numbered.map_batches(
        TagLines,
        fn_constructor_args=(model, documents, dictionaries, args.replace_dictionary),
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
