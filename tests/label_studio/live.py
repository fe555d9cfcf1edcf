"""nertrain serve as the ML backend of a real Label Studio, driven through Label Studio's own
REST API: a project whose control, object and data key are not the defaults; tasks from the
sample (one with emoji before its entities); the backend connected; predictions retrieved
through the Data Manager; annotations submitted; training started from Label Studio; the new
version serving while /predict requests keep being answered. Measures /predict latency and the
time from Label Studio's train request to a served version, and writes them as JSON.

Run by .ci/run (scripts/label-studio-live.sh starts Label Studio): loopback only, bounded in
time. Needs `requests` (installed with label-studio).
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

CONFIG = """<View>
  <Header value="Mark the entities"/>
  <Labels name="entities" toName="passage">
    <Label value="PER"/><Label value="LOC"/><Label value="ORG"/><Label value="MISC"/>
  </Labels>
  <Text name="passage" value="$body"/>
</View>"""

EMOJI_TEXT = "🎉🎉 Peter Blackburn met officials of Siemens in Berlin ."


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def sentences(path):
    """(tokens, tags) of each sentence of a CoNLL file, -DOCSTART- left out."""
    out, tokens, tags = [], [], []
    for line in Path(path).read_text(encoding="utf-8").splitlines() + [""]:
        if not line.strip():
            if tokens and tokens[0] != "-DOCSTART-":
                out.append((tokens, tags))
            tokens, tags = [], []
            continue
        columns = line.split()
        tokens.append(columns[0])
        tags.append(columns[-1])
    return out


def spans(tokens, tags):
    """The text (tokens joined by spaces) and its IOB2 entities as (start, end, label)."""
    text, starts = "", []
    for token in tokens:
        if text:
            text += " "
        starts.append(len(text))
        text += token
    found, current = [], None
    for i, tag in enumerate(tags + ["O"]):
        if current and not tag.startswith("I-"):
            found.append(current)
            current = None
        if tag.startswith("B-"):
            current = [starts[i], starts[i] + len(tokens[i]), tag[2:]]
        elif tag.startswith("I-") and current:
            current[1] = starts[i] + len(tokens[i])
    return text, [tuple(s) for s in found]


class Studio:
    def __init__(self, url, token):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    def call(self, method, path, **kwargs):
        response = self.session.request(method, self.url + path, timeout=120, **kwargs)
        if response.status_code >= 400:
            fail(f"{method} {path}: {response.status_code} {response.text[:500]}")
        return response.json() if response.content else None


def wait_for(what, condition, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    fail(f"timed out after {seconds} s waiting for {what}")


def up(server, url):
    if server.poll() is not None:
        fail(f"nertrain serve exited with {server.returncode}")
    try:
        return requests.get(url + "/health", timeout=2).ok
    except requests.ConnectionError:
        return False


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def predict_body(texts):
    return {
        "tasks": [{"id": 100000 + i, "data": {"body": t}} for i, t in enumerate(texts)],
        "label_config": CONFIG,
        "project": "1.0",
    }


def timed_predicts(backend, texts, count):
    body = predict_body(texts)
    times = []
    for _ in range(count):
        started = time.perf_counter()
        response = requests.post(backend + "/predict", json=body, timeout=60)
        times.append(time.perf_counter() - started)
        check(response.status_code == 200, f"/predict answered {response.status_code}")
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nertrain", required=True)
    parser.add_argument("--model", required=True, help="the model to serve first")
    parser.add_argument("--data", required=True, help="a CoNLL file whose sentences become tasks")
    parser.add_argument("--label-studio", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--port", type=int, default=8931)
    parser.add_argument("--tasks", type=int, default=80)
    parser.add_argument("--results", required=True)
    args = parser.parse_args()

    studio = Studio(args.label_studio, args.token)
    backend = f"http://127.0.0.1:{args.port}"
    work = Path(tempfile.mkdtemp(prefix="nertrain-ls-"))
    versions = work / "versions"
    log = open(work / "serve.log", "w")
    server = subprocess.Popen(
        [args.nertrain, "serve", "--model", args.model, "--addr", f"127.0.0.1:{args.port}",
         "--train-into", str(versions), "--train-epochs", "4", "--threads", "1"],
        stderr=log, env={k: v for k, v in os.environ.items() if not k.startswith("LABEL_STUDIO_")},
    )
    results = {}
    try:
        wait_for("nertrain serve", lambda: up(server, backend), 60)
        first_version = requests.get(backend + "/model", timeout=5).json()["version"]

        gold = sentences(args.data)[: args.tasks]
        texts = [EMOJI_TEXT] + [spans(tokens, tags)[0] for tokens, tags in gold]
        project = studio.call("POST", "/api/projects", json={"title": "nertrain live", "label_config": CONFIG})
        pid = project["id"]
        studio.call("POST", f"/api/projects/{pid}/import", json=[{"body": t} for t in texts])
        tasks = studio.call("GET", f"/api/tasks?project={pid}&page_size=1000")["tasks"]
        check(len(tasks) == len(texts), f"{len(tasks)} tasks imported of {len(texts)}")
        by_text = {t["data"]["body"]: t["id"] for t in tasks}
        text_of = {t["id"]: t["data"]["body"] for t in tasks}

        ml = studio.call("POST", "/api/ml", json={"url": backend, "project": pid, "title": "nertrain"})
        check(ml.get("state") in ("CO", "CONNECTED", None) or "id" in ml, f"ML backend: {ml}")

        # Predictions through the Data Manager's action, for every task.
        started = time.perf_counter()
        studio.call("POST", f"/api/dm/actions?id=retrieve_tasks_predictions&project={pid}",
                    json={"selectedItems": {"all": True, "excluded": []}})
        results["retrieve_predictions_seconds"] = round(time.perf_counter() - started, 3)
        predictions = studio.call("GET", f"/api/predictions?project={pid}")
        check(len(predictions) == len(texts), f"{len(predictions)} predictions for {len(texts)} tasks")
        tagged = subprocess.run(
            [args.nertrain, "tag", "--model", args.model, "--format", "json", "--input", "-"],
            input="".join(t + "\n" for t in texts), capture_output=True, text=True, check=True,
        ).stdout.splitlines()
        expected = {}
        for line in tagged:
            record = json.loads(line)
            expected[record["text"]] = sorted(
                (e["start"], e["end"], e["label"]) for e in record["entities"])
        for prediction in predictions:
            check(prediction["model_version"] == first_version,
                  f"prediction model_version {prediction['model_version']} != {first_version}")
            check(isinstance(prediction.get("score"), float), f"no task score: {prediction}")
            regions = prediction["result"]
            for region in regions:
                check(region["from_name"] == "entities" and region["to_name"] == "passage",
                      f"region names: {region}")
                check(isinstance(region.get("score"), float), f"no region score: {region}")
            got = sorted((r["value"]["start"], r["value"]["end"], r["value"]["labels"][0]) for r in regions)
            want = expected[text_of[prediction["task"]]]
            check(got == want, f"task {prediction['task']}: {got} != tag's {want}")
        emoji = next(p for p in predictions if p["task"] == by_text[EMOJI_TEXT])
        check(any(r["value"]["text"] == "Peter Blackburn" for r in emoji["result"]),
              f"emoji task: {emoji['result']}")
        results["predictions_checked"] = len(predictions)

        # /predict latency, idle.
        sample = texts[1:101] * (100 // max(1, len(texts) - 1) + 1)
        idle = {}
        for n in (1, 10, 100):
            idle[n] = timed_predicts(backend, sample[:n], 20 if n < 100 else 10)
        results["predict_ms_idle"] = {
            str(n): {"median": round(1000 * statistics.median(t), 2), "p99": round(1000 * percentile(t, 99), 2)}
            for n, t in idle.items()}

        # Annotations: the sample's gold entities, submitted to Label Studio.
        for tokens, tags in gold:
            text, found = spans(tokens, tags)
            result = [{"from_name": "entities", "to_name": "passage", "type": "labels",
                       "value": {"start": s, "end": e, "text": text[s:e], "labels": [label]}}
                      for s, e, label in found]
            studio.call("POST", f"/api/tasks/{by_text[text]}/annotations", json={"result": result})

        def learning():
            return requests.get(backend + "/model", timeout=5).json()["learning"]

        # Submissions start trainings of their own: wait for them to settle.
        wait_for("the trainings that submissions started",
                 lambda: (lambda l: l["training"] is None and not l["pending"] and l["versions"])(learning()), 240)
        before = learning()
        check(before["last_error"] is None, f"learning failed: {before['last_error']}")

        # Training asked for from Label Studio, with /predict kept busy meanwhile.
        answered, statuses, versions_seen, stop = [], [], set(), threading.Event()

        def keep_predicting():
            body = predict_body(sample[:10])
            while not stop.is_set():
                started = time.perf_counter()
                response = requests.post(backend + "/predict", json=body, timeout=60)
                answered.append(time.perf_counter() - started)
                statuses.append(response.status_code)
                if response.ok:
                    versions_seen.add(response.json()["model_version"])

        busy = threading.Thread(target=keep_predicting)
        started = time.perf_counter()
        studio.call("POST", f"/api/ml/{ml['id']}/train", json={})
        busy.start()
        count = len(before["versions"])
        after = wait_for("a version trained after the train request",
                         lambda: (lambda l: l if len(l["versions"]) > count and l["training"] is None else None)(learning()), 240)
        results["train_request_to_decision_seconds"] = round(time.perf_counter() - started, 2)
        stop.set()
        busy.join()
        newest = after["versions"][-1]
        results["newest_version"] = newest
        check(all(s == 200 for s in statuses), f"/predict during training: {sorted(set(statuses))}")
        served = [v for v in after["versions"] if v["served"]]
        check(served, f"no version was served: {after['versions']}")
        serving = requests.get(backend + "/model", timeout=5).json()["version"]
        check(serving == served[-1]["id"] and serving != first_version, f"serving {serving}")
        check(serving in versions_seen or newest["served"] is False or len(served) > 1,
              f"the new version's predictions never arrived: {versions_seen}")
        results["versions"] = after["versions"]
        results["predict_ms_while_training"] = {
            "requests": len(answered), "tasks": 10,
            "median": round(1000 * statistics.median(answered), 2),
            "p99": round(1000 * percentile(answered, 99), 2)}
        results["p99_ratio_training_to_idle_10_tasks"] = round(
            percentile(answered, 99) / percentile(idle[10], 99), 2)

        # Label Studio asks the new version for predictions.
        studio.call("POST", f"/api/dm/actions?id=retrieve_tasks_predictions&project={pid}",
                    json={"selectedItems": {"all": True, "excluded": []}})
        newer = [p for p in studio.call("GET", f"/api/predictions?project={pid}") if p["model_version"] == serving]
        check(len(newer) == len(texts), f"{len(newer)} predictions of the new version {serving}")

        # A restart serves the newest accepted version.
        server.terminate()
        server.wait(30)
        server = subprocess.Popen(
            [args.nertrain, "serve", "--model", args.model, "--addr", f"127.0.0.1:{args.port}",
             "--train-into", str(versions), "--threads", "1"], stderr=log)
        wait_for("the restarted server", lambda: up(server, backend), 60)
        check(requests.get(backend + "/model", timeout=5).json()["version"] == serving,
              "the restarted server does not serve the newest accepted version")
        print(json.dumps(results, indent=2))
        Path(args.results).write_text(json.dumps(results, indent=2) + "\n")
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        print((work / "serve.log").read_text()[-3000:], file=sys.stderr)


if __name__ == "__main__":
    main()
