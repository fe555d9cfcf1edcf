#!/usr/bin/env python3
"""The annotation loop, live in a real Label Studio, end to end: what
scripts/experiments/active_learning.py simulates with files, through Label Studio and
`nertrain serve` as its ML backend.

A model is trained on the same random sentences the file loop starts from (every version the
backend trains rehearses them: the base model's training file); the rest of the training file
is imported, in its order, as tasks into a project whose labeling config has the `check` control;
the backend (`--regions budget`, the task score by mnlp) gives every task its prediction and
regions to decide. Each round, a simulated annotator takes tasks in the Data Manager's order by
prediction score (the least sure first), decides each task's regions from gold (widened to the
gold entities they touch, as in the file loop), accepts the model's entities elsewhere, and
submits, until the round's budget of region tokens is spent (counted as `select` counts them:
the tokens the regions cover, a task that would overrun what is left passed over; so the round
takes the tasks the file loop's `select` would); the backend is then asked to learn, judges the
version on the corpus's dev file (`serve --dev`, as the file loop chooses on it; or, with
--judge heldout, on a share of the tasks annotated), serves it if it does no worse and
refreshes Label Studio's predictions (when it is not served, the served version's regions are
re-cut for the tasks left). Each round records the served model's test F1 against the tokens decided, the
round's seconds (annotating, training, refreshing), and `/predict`'s p99 while learning against
idle.

Writes, under --out: results.jsonl (a line per round) and summary.json, with the file loop's
test F1 at the same tokens when --file-results names its results.jsonl. The file loop at the
backend's settings is active_learning.py's `--continue --served-order --judge --max-similarity
1` (the training files in the order a version reads them, versions judged on dev, no near
duplicates skipped), which takes the same tasks and trains the same models.

    scripts/experiments/live_loop.py --label-studio http://localhost:8080 --token T   # CoNLL-2003
    scripts/experiments/live_loop.py --quick --label-studio URL --token T             # the sample (CI)

Label Studio must be running (scripts/ci/label_studio_live.sh starts one for CI), with the
backend's loopback address allowed (ML_BLOCK_LOCAL_IP=false SSRF_PROTECTION_ENABLED=false).
"""

import argparse
import base64
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from nerscripts import read_blocks, write_blocks  # noqa: E402
from active_learning import interpolate, submitted, text_of  # noqa: E402
import nertrain  # noqa: E402 (the wheel: crates/python)

CONFIG = """<View>
  <Labels name="label" toName="text">
    <Label value="PER"/><Label value="LOC"/><Label value="ORG"/><Label value="MISC"/>
  </Labels>
  <Labels name="check" toName="text"><Label value="check" background="#cccccc"/></Labels>
  <Text name="text" value="$text"/>
</View>"""

AUTH = ("loop", "live-loop-secret")


class Studio:
    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    def call(self, method, path, **kwargs):
        response = self.session.request(method, self.url + path, timeout=600, **kwargs)
        if response.status_code >= 400:
            sys.exit(f"{method} {path}: {response.status_code} {response.text[:500]}")
        return response.json() if response.content else None


def wait_for(what, condition, seconds, server=None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server is not None and server.poll() is not None:
            sys.exit(f"nertrain serve exited with {server.returncode} while waiting for {what}")
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    sys.exit(f"timed out after {seconds} s waiting for {what}")


def run(args):
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))}\n{done.stderr}")
    return done.stdout


def test_f1(options, model):
    out = run([options.binary, "eval", "--model", str(model), "--data", str(options.test), "--json"])
    return json.loads(out)["overall"]["f1"]


def tagger_tokens(model, lines, train):
    """Each of the training file's `lines`, its tokens as the model cuts its text, as (start,
    end) code points: what `select`'s token budget counts, which is not always the corpus's
    tokens (`U.S.-based` is three)."""
    cut = nertrain.Tagger(str(model)).tokenize([text_of(train[i]) for i in lines])
    return {i: [tuple(token) for token in tokens] for i, tokens in zip(lines, cut)}


def annotation(sentence, prediction, cut):
    """What the annotator submits for a task (active_learning.submitted: what the prediction's
    `check` regions ask, decided from gold, and its entities elsewhere); the tokens decided;
    and the tokens the regions cover as the backend gave them, in `cut` (the tagger's tokens:
    what `select`'s token budget counts)."""
    result = prediction["result"]
    checks = [(r["value"]["start"], r["value"]["end"]) for r in result if r["from_name"] == "check"]
    entities = [(r["value"]["start"], r["value"]["end"], r["value"]["labels"][0])
                for r in result if r["from_name"] == "label"]
    answer, decided = submitted(sentence, checks, entities)
    asked = sum(1 for s, e in cut if any(s < ce and cs < e for cs, ce in checks))
    return answer, decided, asked


def in_order(studio, project, version, page_size=1000):
    """The tasks without an annotation in the Data Manager's order by prediction score (lowest
    first), a page at a time, each with its prediction of `version`."""
    # Unfiltered, so that annotating leaves the list as it was and no task moves between pages:
    # the tasks annotated are passed over here instead (those of earlier rounds have no
    # prediction of a newer version, and sort last).
    query = json.dumps({"ordering": ["tasks:predictions_score"]})
    for page in range(1, 10**6):
        response = studio.session.get(
            f"{studio.url}/api/tasks?project={project}&page={page}&page_size={page_size}"
            f"&fields=all&query={urllib.parse.quote(query)}", timeout=600)
        if response.status_code == 404:  # past the last page
            return
        response.raise_for_status()
        answer = response.json()
        for task in answer["tasks"]:
            if task.get("total_annotations", 0) or task.get("annotations"):
                continue
            mine = [p for p in task.get("predictions", []) if p["model_version"] == version]
            if mine:
                yield task, mine[-1]
        if len(answer["tasks"]) < page_size:
            return


class Latency:
    """/predict of 10 tasks asked back to back on a thread of its own while it runs."""

    def __init__(self, backend, texts):
        self.body = {"tasks": [{"id": i, "data": {"text": t}} for i, t in enumerate(texts[:10])],
                     "label_config": CONFIG}
        self.backend, self.times, self.failures = backend, [], 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop)
        self.thread.start()

    def loop(self):
        while not self.stop.is_set():
            started = time.perf_counter()
            response = requests.post(self.backend + "/predict", json=self.body, auth=AUTH, timeout=60)
            self.times.append(time.perf_counter() - started)
            self.failures += not response.ok

    def end(self):
        self.stop.set()
        self.thread.join()
        ordered = sorted(self.times)
        p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))] if ordered else None
        return {"requests": len(self.times), "failures": self.failures,
                "p99_ms": round(1000 * p99, 1) if p99 is not None else None}


def up(backend):
    try:
        return requests.get(backend + "/health", timeout=2).ok
    except requests.ConnectionError:
        return False


def learning(backend):
    return requests.get(backend + "/model", timeout=10).json()["learning"]


def refreshed(backend, version, server):
    def done():
        status = learning(backend)
        refresh = (status.get("refresh") or {}) if not status.get("refresh_asked") else {}
        return refresh if refresh.get("version") == version and refresh.get("phase") in ("done", "failed") else None
    status = wait_for(f"the refresh of {version}", done, 3600, server)
    if status["phase"] != "done":
        sys.exit(f"the refresh of {version} failed: {status}")
    return status


def compared(results, opts):
    """The live rounds beside the file loop's (`--file-results`, the same seed and strategy): its
    test F1 at the live loop's tokens decided, and round by round, with how many rounds decided
    the same tokens and scored the same test F1 (to 1e-9)."""
    file_runs = [json.loads(l) for l in Path(opts.file_results).read_text().splitlines() if l]
    mine = [r for r in file_runs if r["seed"] == opts.seed and r["strategy"] == opts.file_strategy]
    curve = sorted((r["tokens"], r["test_f1"]) for r in mine)
    by_round = {r["round"]: r for r in mine}
    rounds = [{"round": r["round"], "live": (r["tokens"], r["test_f1"]),
               "file": (by_round[r["round"]]["tokens"], by_round[r["round"]]["test_f1"])
               if r["round"] in by_round else None} for r in results]
    same = sum(1 for p in rounds if p["file"] is not None and p["file"][0] == p["live"][0]
               and abs(p["file"][1] - p["live"][1]) <= 1e-9)
    at_tokens = [{"tokens": r["tokens"], "live": r["test_f1"], "file": interpolate(curve, r["tokens"])}
                 for r in results]
    gaps = [abs(p["live"] - p["file"]) for p in at_tokens if p["file"] is not None]
    return {"file_loop_at_equal_tokens": at_tokens, "largest_gap": max(gaps) if gaps else None,
            "file_loop_by_round": rounds, "rounds_as_file_loop": same}


def options():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the shipped sample, tiny rounds")
    parser.add_argument("--label-studio", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--config", default="configs/conll-adam.toml")
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/conll2003"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=500)
    parser.add_argument("--step", type=int, default=2000, help="tokens decided a round")
    parser.add_argument("--until-share", type=float, default=0.14)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--patience", type=int, default=4)
    parser.add_argument("--judge", choices=["dev", "heldout"], default="dev",
                        help="what chooses each version's epoch and judges it: the corpus's dev "
                             "file (serve --dev), or --heldout-percent of the tasks annotated")
    parser.add_argument("--heldout-percent", type=int, default=10)
    parser.add_argument("--set", action="append", default=[], help="more fit overrides")
    parser.add_argument("--port", type=int, default=8936)
    parser.add_argument("--refresh-page", type=int, default=1000,
                        help="tasks a page of the backend's refresh of Label Studio's predictions")
    parser.add_argument("--out", default="runs/live-loop")
    parser.add_argument("--binary", default=None)
    parser.add_argument("--file-results", help="active_learning.py's results.jsonl to compare with")
    parser.add_argument("--file-strategy", default="mnlp:regions=budget")
    options = parser.parse_args()
    if options.quick:
        options.config, options.data = "configs/sample.toml", str(ROOT / "data/sample")
        options.start, options.epochs, options.step, options.until_share = 60, 3, 600, 0.35
    else:
        options.set.append('model.char_features="none"')
    if options.binary is None:
        target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        options.binary = str(target / "release" / "nertrain")
    data = Path(options.data)
    options.dev = data / "valid.txt" if (data / "valid.txt").exists() else data / "dev.txt"
    options.test = data / "test.txt"
    options.train = data / "train.txt"
    return options


def start(options, out):
    """The initial model, the project with the rest as tasks, and the backend connected to it."""
    train = read_blocks(options.train)
    order = list(range(len(train)))
    random.Random(options.seed).shuffle(order)
    # In the corpus's order, as the file loop at the backend's settings writes them.
    initial = sorted(order[: options.start])
    write_blocks(out / "initial.txt", [train[i] for i in initial])
    run([options.binary, "fit", "--config", options.config, "--overwrite",
         "--set", f"data.train={json.dumps(str(out / 'initial.txt'))}",
         "--set", f"data.dev={json.dumps(str(options.dev))}",
         "--set", f"data.test={json.dumps(str(options.test))}",
         "--set", 'data.context="sentence"', "--set", "model.mention_dim=0",
         "--set", f"train.output={json.dumps(str(out / 'base'))}",
         "--set", f"train.seed={options.seed}", "--set", f"train.epochs={options.epochs}",
         "--set", f"train.patience={options.patience}", *sum((["--set", s] for s in options.set), [])])
    return train, initial


def create_project(studio, opts, train, rest):
    """A Label Studio project holding the texts not yet labelled, as tasks; its id."""
    project = studio.call("POST", "/api/projects", json={"title": f"live loop seed {opts.seed}", "label_config": CONFIG})
    pid = project["id"]
    for chunk in range(0, len(rest), 2000):
        studio.call("POST", f"/api/projects/{pid}/import",
                    json=[{"text": text_of(train[i]), "line": i} for i in rest[chunk:chunk + 2000]])
    return pid


def start_server(opts, out, log):
    """`nertrain serve` on the base model, learning into out/versions, logging to `log`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABEL_STUDIO_", "BASIC_AUTH_"))}
    env.update(BASIC_AUTH_USER=AUTH[0], BASIC_AUTH_PASS=AUTH[1],
               LABEL_STUDIO_URL=opts.label_studio, LABEL_STUDIO_API_KEY=opts.token)
    judging = ["--dev", str(opts.dev)] if opts.judge == "dev" else ["--heldout-percent", str(opts.heldout_percent)]
    return subprocess.Popen(
        [opts.binary, "serve", "--model", str(out / "base"), "--addr", f"127.0.0.1:{opts.port}",
         "--train-into", str(out / "versions"), "--train-interval", "0", "--train-every", "1000000",
         "--train-epochs", str(opts.epochs), *judging,
         "--label-margin", "100", "--task-score", "mnlp", "--regions", "budget",
         "--region-budget", str(opts.step), "--refresh-rate", "20",
         "--refresh-page", str(opts.refresh_page)],
        stderr=log, env=env, cwd=ROOT)


def connect(studio, backend, pid):
    """The backend as the project's ML backend, its webhooks carrying the credentials."""
    studio.call("POST", "/api/ml", json={
        "url": backend, "project": pid, "title": "nertrain", "auth_method": "BASIC_AUTH",
        "basic_auth_user": AUTH[0], "basic_auth_pass": AUTH[1]})
    basic = "Basic " + base64.b64encode(f"{AUTH[0]}:{AUTH[1]}".encode()).decode()
    for hook in studio.call("GET", f"/api/webhooks?project={pid}"):
        studio.call("PATCH", f"/api/webhooks/{hook['id']}", json={"headers": {"Authorization": basic}})


def annotate_round(studio, pid, served, train, cut, opts):
    """Submits the tasks' regions in Label Studio's order within the round's budget; returns
    the tokens decided and the tasks annotated."""
    this_round, spent, tasks_done = 0, 0, 0
    for task, prediction in in_order(studio, pid, served):
        if spent >= opts.step:
            break
        if not any(r["from_name"] == "check" for r in prediction["result"]):
            continue
        line = task["data"]["line"]
        submitted, count, asked = annotation(train[line], prediction, cut[line])
        if asked > opts.step - spent:
            continue
        studio.call("POST", f"/api/tasks/{task['id']}/annotations", json={"result": submitted})
        this_round += count
        spent += asked
        tasks_done += 1
    return this_round, tasks_done


def train_version(backend, pid, texts, rnd, server):
    """Asks for a version and waits for it: the learning state, /predict's latency idle and
    while learning, and the seconds it took."""
    idle = Latency(backend, texts)
    time.sleep(3)
    idle = idle.end()
    count = len(learning(backend)["versions"])
    busy = Latency(backend, texts)
    trained_at = time.perf_counter()
    requests.post(backend + "/webhook", auth=AUTH, timeout=30,
                  json={"action": "START_TRAINING", "project": {"id": pid}}).raise_for_status()
    state = wait_for(f"round {rnd}'s version", lambda: (lambda l: l if len(l["versions"]) > count
                     and l["training"] is None and not l["pending"] and not l["refresh_asked"]
                     else None)(learning(backend)), 7200, server)
    busy = busy.end()
    return state, idle, busy, time.perf_counter() - trained_at


def write_summary(results, opts, total_tokens, out):
    """summary.json, with the file loop compared; with --quick, what CI checks of the loop."""
    summary = {"total_tokens": total_tokens, "rounds": results}
    if opts.file_results:
        summary.update(compared(results, opts))
    p99 = [r["predict_learning"]["p99_ms"] / r["predict_idle"]["p99_ms"] for r in results[1:]
           if r["predict_learning"]["p99_ms"] and r["predict_idle"]["p99_ms"]]
    summary["p99_learning_over_idle_median"] = statistics.median(p99) if p99 else None
    if opts.quick:
        # What CI checks of the loop on the sample: rounds that learn, and /predict answered
        # throughout.
        served = [r for r in results[1:] if r["served"]]
        if len(results) < 3 or not served or results[-1]["test_f1"] <= results[0]["test_f1"]:
            sys.exit(f"the live loop did not learn: {[(r['tokens'], r['test_f1']) for r in results]}")
        failures = sum(r[k]["failures"] for r in results[1:] for k in ("predict_idle", "predict_learning"))
        if failures:
            sys.exit(f"{failures} /predict requests failed during the loop")
        # The file loop at the backend's settings takes the same tasks and trains the same
        # models: any difference is the live path's.
        if opts.file_results and summary["rounds_as_file_loop"] != len(results):
            sys.exit(f"the live loop and the file loop differ: {summary['file_loop_by_round']}")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "rounds"}, indent=2))


def main():
    opts = options()
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    studio = Studio(opts.label_studio, opts.token)
    backend = f"http://127.0.0.1:{opts.port}"
    train, initial = start(opts, out)
    total_tokens = sum(len(s) for s in train)
    rest = [i for i in range(len(train)) if i not in set(initial)]
    cut = tagger_tokens(out / "base", rest, train)
    pid = create_project(studio, opts, train, rest)
    log = open(out / "serve.log", "w")
    server = start_server(opts, out, log)
    results = []
    try:
        wait_for("nertrain serve", lambda: up(backend), 60, server)
        connect(studio, backend, pid)
        served = requests.get(backend + "/model", timeout=5).json()["version"]
        started = time.perf_counter()
        requests.post(backend + "/versions/base/serve", json={}, auth=AUTH, timeout=120).raise_for_status()
        refresh = refreshed(backend, served, server)
        decided = sum(len(train[i]) for i in initial)
        record = {"seed": opts.seed, "round": 0, "sentences": len(initial), "tokens": decided,
                  "test_f1": test_f1(opts, out / "base"), "version": served, "served": True,
                  "refresh_seconds": round(time.perf_counter() - started, 2), "refresh_tasks": refresh["predicted"]}
        results.append(record)
        print(json.dumps(record), file=sys.stderr)
        texts = [text_of(train[i]) for i in rest[:10]]
        model_dir, annotated = out / "base", 0
        for rnd in range(1, 10**6):
            if decided >= opts.until_share * total_tokens:
                break
            round_started = time.perf_counter()
            this_round, tasks_done = annotate_round(studio, pid, served, train, cut, opts)
            if this_round == 0:
                print(f"round {rnd}: no task has a region to decide; the model is sure of the rest", file=sys.stderr)
                break
            decided += this_round
            annotated += tasks_done
            annotating = time.perf_counter() - round_started
            state, idle, busy, training = train_version(backend, pid, texts, rnd, server)
            newest = state["versions"][-1]
            if newest["served"]:
                served, model_dir = newest["id"], out / "versions" / newest["name"]
            # Into the new version, or the served one's regions re-cut for the tasks left.
            refresh_started = time.perf_counter()
            refresh = refreshed(backend, served, server)
            refresh_seconds = time.perf_counter() - refresh_started
            record = {"seed": opts.seed, "round": rnd, "sentences": len(initial) + annotated, "tokens": decided,
                      "test_f1": test_f1(opts, model_dir), "version": served, "served": newest["served"],
                      "heldout_f1": newest["heldout_f1"], "annotate_seconds": round(annotating, 2),
                      "train_seconds": round(training, 2), "refresh_seconds": round(refresh_seconds, 2),
                      "refresh_posted": refresh["predicted"], "refresh_stood": refresh.get("stood", 0),
                      "cut": refresh.get("cut"), "judge": opts.judge,
                      "predict_idle": idle, "predict_learning": busy}
            results.append(record)
            print(json.dumps(record), file=sys.stderr)
    finally:
        server.terminate()
        server.wait(60)
        log.close()
        with open(out / "results.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in results)
    write_summary(results, opts, total_tokens, out)


if __name__ == "__main__":
    main()
