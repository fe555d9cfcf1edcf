"""/predict latency while nertrain serve learns, against idle: the p99 goal of the Label Studio
backend (at most 2x), measured on the backend alone.

tests/label_studio/live.py measures the same with a real Label Studio on the same machine,
whose own work (taking the annotations, exporting the project) then shares the cores. Here the
project's export is a file built from a CoNLL file and served by a static file server at the
address the backend fetches it from, so that what is measured is what learning costs the
requests: the training, judging and loading of each version, and the swap.

Usage: python3 scripts/bench/learning_latency.py --nertrain target/release/nertrain \
           --model MODEL --data data/sample/dev.txt [--trainings 6] [--idle-seconds 5]
Prints JSON. Loopback only; bounded in time.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "label_studio"))
from live import percentile, sentences, spans  # noqa: E402

CONFIG = """<View><Labels name="label" toName="text">
<Label value="PER"/><Label value="LOC"/><Label value="ORG"/><Label value="MISC"/>
</Labels><Text name="text" value="$text"/></View>"""


def export(data, count):
    """Label Studio's JSON export of `count` sentences of `data`, annotated with their gold."""
    tasks = []
    for i, (tokens, tags) in enumerate(sentences(data)[:count]):
        text, found = spans(tokens, tags)
        result = [{"from_name": "label", "to_name": "text", "type": "labels",
                   "value": {"start": s, "end": e, "text": text[s:e], "labels": [label]}}
                  for s, e, label in found]
        tasks.append({"id": i + 1, "data": {"text": text},
                      "annotations": [{"id": i + 1, "result": result,
                                       "updated_at": "2026-01-01T00:00:00Z"}]})
    return tasks, [t["data"]["text"] for t in tasks]


def loop(backend, texts, stop, times):
    body = {"tasks": [{"id": i, "data": {"text": t}} for i, t in enumerate(texts)],
            "label_config": CONFIG}
    session = requests.Session()
    while not stop.is_set():
        started = time.perf_counter()
        response = session.post(backend + "/predict", json=body, timeout=60)
        times.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise SystemExit(f"/predict answered {response.status_code}: {response.text}")


def measure(backend, texts, during):
    """Latencies of back-to-back /predict requests while `during()` runs."""
    stop, times = threading.Event(), []
    thread = threading.Thread(target=loop, args=(backend, texts, stop, times))
    thread.start()
    try:
        during()
    finally:
        stop.set()
        thread.join()
    return times


def summary(times):
    return {"requests": len(times), "median_ms": round(1000 * statistics.median(times), 2),
            "p99_ms": round(1000 * percentile(times, 99), 2)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nertrain", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True, help="a CoNLL file: the annotated tasks")
    parser.add_argument("--tasks", type=int, default=80)
    parser.add_argument("--trainings", type=int, default=6)
    parser.add_argument("--idle-seconds", type=float, default=5)
    parser.add_argument("--port", type=int, default=8957)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="nertrain-learning-bench-"))
    tasks, texts = export(args.data, args.tasks)
    where = work / "studio" / "api" / "projects" / "1"
    where.mkdir(parents=True)
    (where / "export").write_text(json.dumps(tasks))
    # GET /api/projects/1 is redirected to /api/projects/1/, which serves index.html.
    (where / "index.html").write_text(json.dumps({"id": 1, "label_config": CONFIG}))
    studio_port = args.port + 1
    studio = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(studio_port), "--bind", "127.0.0.1"],
        cwd=work / "studio", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    backend = f"http://127.0.0.1:{args.port}"
    env = dict(os.environ, LABEL_STUDIO_URL=f"http://127.0.0.1:{studio_port}",
               LABEL_STUDIO_API_KEY="static-file")
    log = open(work / "serve.log", "w")
    server = subprocess.Popen(
        [args.nertrain, "serve", "--model", args.model, "--addr", f"127.0.0.1:{args.port}",
         "--threads", "1", "--train-into", str(work / "versions"), "--train-epochs", "4"],
        stderr=log, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(backend + "/health", timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("nertrain serve did not start")
            time.sleep(0.2)
        sample = texts[:10]
        def watching():
            # What watching a training costs (GET /model ten times a second), idle too.
            deadline = time.monotonic() + args.idle_seconds
            while time.monotonic() < deadline:
                requests.get(backend + "/model", timeout=5)
                time.sleep(0.1)

        idle = measure(backend, sample, watching)
        seconds = []

        def trainings():
            for n in range(1, args.trainings + 1):
                started = time.perf_counter()
                requests.post(backend + "/webhook", timeout=10,
                              json={"action": "START_TRAINING", "project": {"id": 1}})
                while True:
                    learning = requests.get(backend + "/model", timeout=5).json()["learning"]
                    if learning["last_error"]:
                        raise SystemExit(f"learning failed: {learning['last_error']}")
                    if len(learning["versions"]) >= n and learning["training"] is None:
                        break
                    if time.perf_counter() - started > 120:
                        raise SystemExit("a training took over 120 s")
                    time.sleep(0.1)
                seconds.append(time.perf_counter() - started)

        learning = measure(backend, sample, trainings)
        print(json.dumps({
            "tasks_annotated": len(tasks), "tasks_per_request": len(sample),
            "idle": summary(idle), "learning": summary(learning),
            "trainings": len(seconds),
            "seconds_per_training_median": round(statistics.median(seconds), 2),
            "p99_ratio_learning_to_idle": round(percentile(learning, 99) / percentile(idle, 99), 2),
        }, indent=2))
    finally:
        server.terminate()
        server.wait(30)
        studio.terminate()
        log.close()
        subprocess.run(["rm", "-rf", str(work)])


if __name__ == "__main__":
    main()
