"""The annotation loop inside a real Label Studio, driven through its own REST API: a project
whose labeling config has the `check` control beside the entity labels; the backend's
predictions carry each task's regions to decide (as /predict answers them); Label Studio's
interactive pre-annotation endpoint decodes a task again with the annotator's entity forced;
annotations submitted as an annotator leaves them (gold inside the regions, the model's
entities elsewhere) train a version, and once it is served Label Studio's predictions and
scores are refreshed and the project's model version switched, so that the Data Manager's order
by prediction score changes; a version is rolled back and forth through the authenticated API
and shows in Label Studio's model-version list; tasks deleted mid-refresh shift no task out of it;
a rollback made while a version trains holds; Label Studio read under a path prefix. Measures
the refresh per task, and writes the figures as JSON.

Run by scripts/ci/label_studio_live.sh beside live.py: loopback only, bounded in time.
"""

import argparse
import base64
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import nertrain  # the wheel (crates/python), installed beside Label Studio
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live import AUTH, REGIONS_CONFIG, Studio, check, fail, sentences, spans, up, wait_for  # noqa: E402


def predict_direct(backend, task, context=None):
    """The backend's own /predict of one task (with an interactive context when given)."""
    body = {"tasks": [{"id": task["id"], "data": task["data"]}], "label_config": REGIONS_CONFIG}
    if context is not None:
        body["params"] = {"context": context}
    response = requests.post(backend + "/predict", json=body, auth=AUTH, timeout=60)
    check(response.ok, f"/predict: {response.status_code} {response.text[:300]}")
    return response.json()["results"][0]


def regions_of(result, from_name):
    return sorted((r["value"]["start"], r["value"]["end"], r["value"]["labels"][0])
                  for r in result if r["from_name"] == from_name)


def ordered(studio, project):
    """The project's tasks without an annotation as the Data Manager orders them by prediction
    score, lowest first: (task id, score) of each."""
    query = json.dumps({"ordering": ["tasks:predictions_score"], "filters": {
        "conjunction": "and", "items": [{"filter": "filter:tasks:total_annotations",
                                         "operator": "equal", "type": "Number", "value": 0}]}})
    tasks = studio.call("GET", f"/api/tasks?project={project}&page_size=1000&fields=all"
                               f"&query={urllib.parse.quote(query)}")["tasks"]
    return [(t["id"], t.get("predictions_score")) for t in tasks]


def model(backend):
    return requests.get(backend + "/model", timeout=5).json()


def refreshed(backend, version):
    """Waits for the refresh of `version` to end; its status."""
    def done():
        learning = model(backend)["learning"]
        refresh = (learning.get("refresh") or {}) if not learning["refresh_asked"] else {}
        if refresh.get("version") == version and refresh.get("phase") in ("done", "failed"):
            return refresh
        return None
    status = wait_for(f"Label Studio's predictions refreshed with {version}", done, 180)
    check(status["phase"] == "done", f"the refresh of {version} failed: {status}")
    return status


def in_step(studio, project, version, unannotated):
    """Checks that Label Studio is in step with `version`: the project's model version, and a
    prediction of it for every task without an annotation, scored."""
    got = studio.call("GET", f"/api/projects/{project}")["model_version"]
    check(got == version, f"the project's model version is {got}, not {version}")
    predictions = studio.call("GET", f"/api/predictions?project={project}")
    of_version = {p["task"]: p for p in predictions if p["model_version"] == version}
    missing = [t for t in unannotated if t not in of_version]
    check(not missing, f"tasks without a prediction of {version}: {missing[:10]}")
    return of_version


def annotate(studio, task, prediction, gold):
    """Submits `task` as an annotator leaves it: `gold` entities where they touch a region to
    decide of `prediction`, the model's entities elsewhere, and the regions kept."""
    result = prediction["result"]
    checks = [(r["value"]["start"], r["value"]["end"]) for r in result if r["from_name"] == "check"]
    touches = lambda s, e: any(s < ce and cs < e for cs, ce in checks)
    text = task["data"]["text"]
    entities = [(s, e, label) for s, e, label in gold if touches(s, e)]
    entities += [(r["value"]["start"], r["value"]["end"], r["value"]["labels"][0]) for r in result
                 if r["from_name"] == "label" and not touches(r["value"]["start"], r["value"]["end"])]
    submitted = [nertrain.label_studio_region(text, s, e, label) for s, e, label in entities]
    submitted += [r for r in result if r["from_name"] == "check"]
    studio.call("POST", f"/api/tasks/{task['id']}/annotations", json={"result": submitted})


def trained_one_more(backend, count):
    """Waits for the training asked for to end with a version more than `count`, and for the
    refresh it asks for to begin; learning's status."""
    def done():
        learning = model(backend)["learning"]
        if len(learning["versions"]) > count and learning["training"] is None \
                and not learning["pending"] and not learning["refresh_asked"]:
            return learning
        return None
    return wait_for("a version trained on the annotations", done, 300)


def serve_version(backend, name, auth=AUTH):
    return requests.post(f"{backend}/versions/{name}/serve", json={}, auth=auth, timeout=120)


def judged_on_dev(args, studio, pid, ml, server, start, by_id, gold_of, annotated, served, work):
    """A server judging on a gold dev file (`--dev`): every annotated task is trained on, the
    version is judged on the file, and when it is not served Label Studio's predictions of the
    served version are re-cut for the tasks left, posting only where the cut moved."""
    # A dev file the served version tags without a mistake (its own entities, on texts outside
    # the project), so that a new version can only be served by doing as well: it is not.
    backend = f"http://127.0.0.1:{args.port}"
    texts = [spans(*s)[0] for s in sentences(args.data)[args.tasks: args.tasks + 20]]
    lines = []
    for i, text in enumerate(texts):
        result = predict_direct(backend, {"id": 10**6 + i, "data": {"text": text}})
        lines.append({"text": text, "label": [list(r) for r in regions_of(result["result"], "label")]})
    check(sum(len(l["label"]) for l in lines) >= 5, f"too few entities on the dev texts: {lines}")
    dev = work / "dev.jsonl"
    dev.write_text("".join(json.dumps(l) + "\n" for l in lines))
    server.terminate()
    server.wait(30)
    server = start(["--refresh-rate", "50", "--refresh-page", "25", "--dev", str(dev)])
    try:
        wait_for("the server judging on dev", lambda: up(server, backend), 60)
        count = len(model(backend)["learning"]["versions"])
        predictions = in_step(studio, pid, served["id"], [t for t in by_id if t not in annotated])
        more = sorted(t for t in by_id if t not in annotated)[:8]
        for task_id in more:
            annotate(studio, by_id[task_id], predictions[task_id], gold_of[task_id])
        annotated = annotated + more
        left = [t for t in by_id if t not in annotated]
        studio.call("POST", f"/api/ml/{ml['id']}/train", json={})
        learning = trained_one_more(backend, count)
        newest = learning["versions"][-1]
        check(newest["dev"] == str(dev.resolve()) and newest["reason"].startswith("dev F1"),
              f"not judged on the dev file: {newest}")
        check(newest["train_tasks"] == len(annotated) and newest["heldout_tasks"] == 0,
              f"a task was held out, or not trained on: {newest}")
        check(not newest["served"] and newest["previous_f1"] == 100.0,
              f"a version below the served one's dev F1 100 was served: {newest}")
        # The served version's regions re-cut for the tasks left: every one has its prediction,
        # posted again or standing.
        recut = refreshed(backend, served["id"])
        check(recut["annotated"] == len(annotated) and recut["predicted"] + recut["stood"] == len(left),
              f"the re-cut after {newest['name']}: {recut}")
        in_step(studio, pid, served["id"], left)
        # Served again by hand, with nothing annotated since: the cut cannot move, and what was
        # posted stands.
        check(serve_version(backend, served["name"]).ok, "serving the served version again")
        again = refreshed(backend, served["id"])
        check(again["stood"] == len(left) and again["predicted"] == 0 and again["cut"] == recut["cut"],
              f"served again with nothing new, it posted again: {again}")
        return {"version": newest["name"], "dev_f1": newest["heldout_f1"], "reason": newest["reason"],
                "recut": {k: recut[k] for k in ("cut", "predicted", "stood", "annotated")},
                "again": {k: again[k] for k in ("cut", "predicted", "stood")}}
    finally:
        server.terminate()
        server.wait(30)


class PrefixProxy(http.server.ThreadingHTTPServer):
    """Label Studio served under /label-studio, as a reverse proxy serves it: a request under the
    prefix goes to Label Studio with the prefix cut; any other path gets 404 and is noted."""

    PREFIX = "/label-studio"

    def __init__(self, upstream):
        self.upstream = upstream.rstrip("/")
        self.forwarded, self.missed = [], []
        super().__init__(("127.0.0.1", 0), self.Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}{self.PREFIX}"

    class Handler(http.server.BaseHTTPRequestHandler):
        def forward(self):
            proxy = self.server
            if not self.path.startswith(proxy.PREFIX + "/"):
                proxy.missed.append(self.path)
                self.send_error(404)
                return
            proxy.forwarded.append(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
            answer = requests.request(self.command, proxy.upstream + self.path[len(proxy.PREFIX):],
                                      data=self.rfile.read(length) if length else None, headers=headers,
                                      timeout=120)
            self.send_response(answer.status_code)
            self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = do_PATCH = forward

        def log_message(self, *_):
            pass


def rollback_during_training(args, studio, pid, ml, start, by_id, gold_of, base_id, served):
    """The operator rolls back to the base model while a version continued from the served one
    trains: the version is judged against the base, served only if it does no worse, and its
    reason says so; the rollback is not undone. The server reads this Label Studio under a path
    prefix, behind a proxy: every call it makes goes under the prefix."""
    backend = f"http://127.0.0.1:{args.port}"
    proxy = PrefixProxy(args.label_studio)
    server = start(["--refresh-rate", "50", "--refresh-page", "25"], epochs=40,
                   studio_url=proxy.url)
    try:
        wait_for("the server, training longer", lambda: up(server, backend), 60)
        learning = model(backend)["learning"]
        count = len(learning["versions"])
        check(learning["served"] == served["name"], f"not serving {served['name']}: {learning}")
        # Every task annotated: a training long enough to be caught under way.
        predictions = in_step(studio, pid, served["id"], [])
        for task_id in by_id:
            if studio.call("GET", f"/api/tasks/{task_id}")["total_annotations"] == 0:
                prediction = predictions.get(task_id) or predict_direct(backend, by_id[task_id])
                annotate(studio, by_id[task_id], prediction, gold_of[task_id])
        studio.call("POST", f"/api/ml/{ml['id']}/train", json={})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            training = model(backend)["learning"]["training"]
            if training and training["epoch"] >= 2:
                break
            time.sleep(0.05)
        else:
            fail("no training under way past its first epoch")
        response = serve_version(backend, "base")
        check(response.ok and response.json()["id"] == base_id, f"serve base: {response.text}")
        check(model(backend)["learning"]["training"] is not None,
              "the training ended before the rollback: train longer")
        learning = trained_one_more(backend, count)
        trained = learning["versions"][-1]
        check(trained["reason"].startswith("judged against base, served by hand while it trained"),
              f"{trained['name']} was not judged against the model rolled back to: {trained}")
        now = model(backend)["version"]
        expected = trained["id"] if trained["served"] else base_id
        check(now == expected, f"serving {now}, not {expected}: {trained}")
        if trained["served"]:
            check(trained["heldout_f1"] >= trained["previous_f1"], f"served below base: {trained}")
        refreshed(backend, model(backend)["version"])
        exported = f"{PrefixProxy.PREFIX}/api/projects/{pid}/export?exportType=JSON"
        check(exported in proxy.forwarded and not proxy.missed,
              f"calls outside the prefix {proxy.missed[:5]}; under it {sorted(set(proxy.forwarded))[:10]}")
        return {"version": trained["name"], "served": trained["served"],
                "reason": trained["reason"], "calls_under_prefix": len(proxy.forwarded)}
    finally:
        server.terminate()
        server.wait(30)
        proxy.shutdown()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nertrain", required=True)
    parser.add_argument("--model", required=True, help="the model to serve first")
    parser.add_argument("--data", required=True, help="a CoNLL file whose sentences become tasks")
    parser.add_argument("--label-studio", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--port", type=int, default=8935)
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--annotate", type=int, default=24, help="tasks annotated before training")
    parser.add_argument("--results", required=True)
    args = parser.parse_args()

    studio = Studio(args.label_studio, args.token)
    backend = f"http://127.0.0.1:{args.port}"
    work = Path(tempfile.mkdtemp(prefix="nertrain-ls-loop-"))
    log = open(work / "serve.log", "w")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABEL_STUDIO_", "BASIC_AUTH_"))}
    env.update(BASIC_AUTH_USER=AUTH[0], BASIC_AUTH_PASS=AUTH[1],
               LABEL_STUDIO_URL=args.label_studio, LABEL_STUDIO_API_KEY=args.token)

    def start(refresh, epochs=3, studio_url=None):
        return subprocess.Popen(
            [args.nertrain, "serve", "--model", args.model, "--addr", f"127.0.0.1:{args.port}",
             "--train-into", str(work / "versions"), "--threads", "1", "--train-interval", "0",
             "--train-every", "100000", "--train-epochs", str(epochs), "--regions", "budget",
             "--region-budget", "40",
             # Few held-out tasks judge a version here: a label with one entity there must not
             # decide it.
             "--label-margin", "100"] + refresh,
            stderr=log, env={**env, "LABEL_STUDIO_URL": studio_url or args.label_studio})

    # Slow enough to be caught mid-way.
    slow = ["--refresh-rate", "4", "--refresh-page", "4"]
    server = start(slow)
    results, passed = {}, False
    try:
        wait_for("nertrain serve", lambda: up(server, backend), 60)
        base_id = model(backend)["version"]
        gold = sentences(args.data)[: args.tasks]
        texts = [spans(tokens, tags)[0] for tokens, tags in gold]
        project = studio.call("POST", "/api/projects", json={"title": "nertrain loop", "label_config": REGIONS_CONFIG})
        pid = project["id"]
        studio.call("POST", f"/api/projects/{pid}/import", json=[{"text": t} for t in texts])
        tasks = studio.call("GET", f"/api/tasks?project={pid}&page_size=1000")["tasks"]
        check(len(tasks) == len(texts), f"{len(tasks)} tasks imported of {len(texts)}")
        by_id = {t["id"]: t for t in tasks}
        gold_of = {t["id"]: spans(*gold[texts.index(t["data"]["text"])])[1] for t in tasks}
        ml = studio.call("POST", "/api/ml", json={
            "url": backend, "project": pid, "title": "nertrain", "auth_method": "BASIC_AUTH",
            "basic_auth_user": AUTH[0], "basic_auth_pass": AUTH[1], "is_interactive": True})
        # Label Studio's webhook to the backend, with the credentials it does not send itself.
        hooks = [h for h in studio.call("GET", f"/api/webhooks?project={pid}") if h["url"] == backend + "/webhook"]
        basic = "Basic " + base64.b64encode(f"{AUTH[0]}:{AUTH[1]}".encode()).decode()
        for hook in hooks:
            studio.call("PATCH", f"/api/webhooks/{hook['id']}", json={"headers": {"Authorization": basic}})

        # Serving the base model again refreshes every task: its predictions carry the regions
        # to decide, exactly as the backend's own /predict answers them, and the project's model
        # version is the base model's. A server killed mid-way goes on from its last page.
        started = time.perf_counter()
        response = serve_version(backend, "base")
        check(response.ok, f"/versions/base/serve: {response.status_code} {response.text}")
        def posting(at_least):
            refresh = model(backend)["learning"].get("refresh") or {}
            return refresh if refresh.get("phase") == "posting" and refresh["page"] >= at_least else None
        cut_short = wait_for("a refresh two pages in", lambda: posting(2), 120)
        server.kill()
        server.wait(30)
        saved = json.loads((work / "versions" / "refresh.json").read_text())
        check(saved["phase"] == "posting" and saved["page"] >= cut_short["page"], f"saved: {saved}")
        # Tasks deleted meanwhile (the first page's) shift no task out of the refresh: it goes
        # on after the last task it read, not from a page number.
        deleted = sorted(by_id)[:4]
        for task_id in deleted:
            studio.call("DELETE", f"/api/tasks/{task_id}")
        tasks = [t for t in tasks if t["id"] not in deleted]
        by_id = {t["id"]: t for t in tasks}
        server = start(slow)
        wait_for("the restarted server", lambda: up(server, backend), 60)
        status = refreshed(backend, base_id)
        # Resumed, not begun again: the pages posted before the kill were not posted twice
        # (but the one under way when it came, at most).
        counts = {}
        for p in studio.call("GET", f"/api/predictions?project={pid}"):
            if p["model_version"] == base_id:
                counts[p["task"]] = counts.get(p["task"], 0) + 1
        twice = sum(c > 1 for c in counts.values())
        check(len(counts) == len(tasks) and twice <= 4,
              f"{len(counts)} of {len(tasks)} tasks with a prediction, {twice} with two: begun "
              f"again, not resumed, or tasks deleted shifted others out of the refresh")
        results["refresh_resumed_at_page"] = saved["page"]
        server.terminate()
        server.wait(30)
        server = start(["--refresh-rate", "50", "--refresh-page", "25"])
        wait_for("the server, refreshing faster", lambda: up(server, backend), 60)
        results["refresh_base"] = {"tasks": status["predicted"], "seconds": round(time.perf_counter() - started, 2),
                                   "cut": status["cut"]}
        base_predictions = in_step(studio, pid, base_id, list(by_id))
        with_regions = 0
        for task_id, prediction in base_predictions.items():
            direct = predict_direct(backend, by_id[task_id])
            for from_name in ("label", "check"):
                check(regions_of(prediction["result"], from_name) == regions_of(direct["result"], from_name),
                      f"task {task_id}: the refreshed {from_name} regions are not /predict's")
            with_regions += bool(regions_of(prediction["result"], "check"))
        check(with_regions > 0, "no refreshed prediction has a region to decide")
        results["tasks_with_regions"] = with_regions
        before = ordered(studio, pid)

        # Interactive pre-annotation through Label Studio: the annotator draws the first word of
        # a task as an ORG; the backend decodes the task again with it forced.
        task = next(t for t in tasks if len(t["data"]["text"].split()[0]) > 2)
        word = task["data"]["text"].split()[0]
        drawn = nertrain.label_studio_region(task["data"]["text"], 0, len(word), "ORG")
        answer = studio.call("POST", f"/api/ml/{ml['id']}/interactive-annotating",
                             json={"task": task["id"], "context": {"result": [drawn]}})
        check("data" in answer and not answer.get("errors"), f"interactive pre-annotation: {answer}")
        entities = regions_of(answer["data"]["result"], "label")
        check((0, len(word), "ORG") in entities, f"the forced entity is not in {entities}")
        direct = predict_direct(backend, task, {"result": [drawn]})
        check(entities == regions_of(direct["result"], "label"),
              f"interactive {entities} != /predict's {regions_of(direct['result'], 'label')}")
        results["interactive_entities"] = len(entities)

        # Annotations as an annotator leaves them: gold entities where they touch a region to
        # decide, the model's entities elsewhere, and the regions kept.
        annotated = sorted(by_id)[: args.annotate]
        for task_id in annotated:
            annotate(studio, by_id[task_id], base_predictions[task_id], gold_of[task_id])
        unannotated = [t for t in by_id if t not in annotated]

        # A training asked for from Label Studio; the version served is refreshed into it.
        studio.call("POST", f"/api/ml/{ml['id']}/train", json={})
        learning = trained_one_more(backend, 0)
        newest = learning["versions"][-1]
        check(newest["served"], f"the version trained was not served: {newest}")
        check(newest["train_tasks"] + newest["heldout_tasks"] == len(annotated),
              f"the version did not learn from the {len(annotated)} tasks annotated: {newest}")
        results["heldout_partial"] = newest["heldout_partial"]
        started = time.perf_counter()
        status = refreshed(backend, newest["id"])
        results["refresh_new"] = {"tasks": status["predicted"], "annotated": status["annotated"],
                                  "seconds": round(status["seconds"], 2)}
        check(status["annotated"] == len(annotated) and status["predicted"] == len(unannotated),
              f"refresh counts: {status}")
        new_predictions = in_step(studio, pid, newest["id"], unannotated)
        after = ordered(studio, pid)
        check([t for t, _ in after] != [t for t, _ in before if t in unannotated],
              "the Data Manager's order by prediction score did not change with the new version")
        scores = {t: new_predictions[t]["score"] for t in unannotated}
        check(all(abs(s - scores[t]) < 1e-9 for t, s in after),
              "the Data Manager sorts by other scores than the new version's")
        check([s for _, s in after] == sorted(s for _, s in after), "the order is not by score")
        results["order_changed"] = sum(a != b for a, b in zip([t for t, _ in after],
                                                               [t for t, _ in before if t in unannotated]))

        # Rolled back to the base model and forth again, through the authenticated API.
        check(serve_version(backend, "base", auth=None).status_code == 401, "serving without credentials")
        for name, version in (("base", base_id), (newest["name"], newest["id"])):
            response = serve_version(backend, name)
            check(response.ok and response.json()["id"] == version, f"serve {name}: {response.text}")
            check(model(backend)["version"] == version, f"not serving {name}")
            refreshed(backend, version)
            in_step(studio, pid, version, unannotated)
        # The page shows the refresh done, and a button to serve the version not served.
        browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
        check(browser, "the page check needs Chromium (apt-get install chromium)")
        response = serve_version(backend, "base")
        check(response.ok, f"serve base: {response.text}")
        refreshed(backend, base_id)
        dom = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={work / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
             backend + "/"], capture_output=True, text=True, timeout=120).stdout
        check(f"Label Studio in step: Label Studio's predictions for version {base_id}" in dom,
              "the page does not show the refresh done")
        check(f">serve {newest['name']}</button>" in dom, f"the page has no button to serve {newest['name']}")
        response = serve_version(backend, newest["name"])
        check(response.ok, f"serve {newest['name']}: {response.text}")
        refreshed(backend, newest["id"])
        listed = studio.call("GET", f"/api/ml/{ml['id']}/versions")["versions"]
        check(base_id in listed and newest["id"] in listed, f"Label Studio's model versions: {listed}")
        results["label_studio_versions"] = listed
        results["dev"] = judged_on_dev(args, studio, pid, ml, server, start, by_id, gold_of,
                                       annotated, newest, work)
        results["rollback"] = rollback_during_training(args, studio, pid, ml, start, by_id, gold_of,
                                                       base_id, newest)
        per_task = results["refresh_new"]["seconds"] / max(1, len(unannotated))
        results["refresh_seconds_per_task"] = round(per_task, 4)

        print(json.dumps(results, indent=2))
        Path(args.results).write_text(json.dumps(results, indent=2) + "\n")
        passed = True
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        print((work / "serve.log").read_text()[-3000:], file=sys.stderr)
        if passed:
            shutil.rmtree(work)
        else:
            print(f"kept for a look: {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
