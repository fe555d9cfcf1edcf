"""scripts/ray/sweep.py and scripts/ray/ray_tag.py on a real two-node Ray cluster over
loopback (scripts/ci/ray_cluster.sh starts it in a network namespace of its own and runs this
inside it):

1. search spaces a user gets wrong are errors before any trial starts;
2. a sweep on the sample with ASHA, its driver killed mid-way (no fit outlives it) and resumed
   (refused beside a driver that runs, and with another space): trials that trail are stopped
   and leave runs that `nertrain eval` reads; the best experiment written runs as is; a sweep
   whose trial fails exits 1;
3. a sweep that runs every trial: the second node is lost while its trial runs, Tune restores
   the trial on the head, fit resumes it, and its model equals an uninterrupted run's, byte for
   byte;
4. Ray Data tags the sample's raw text as `nertrain tag --input` does;
5. usage.md's example runs as written, and its best configuration is confirmed on seeds;
6. trials with a GPU share (`--gpus-per-trial`) run fit on wgpu on the node that has the GPU (here
   the head's one, which is Mesa's software Vulkan driver), with `--nertrain-gpu`'s binary once
   it exists (CI builds it while the other checks run); a binary without wgpu is refused before
   any trial starts.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SWEEP = ROOT / "scripts" / "ray" / "sweep.py"


def fail(message):
    sys.exit(f"FAILED: {message}")


def check(condition, message):
    if not condition:
        fail(message)


def sweep(args, *extra, timeout=600):
    return subprocess.run([sys.executable, str(SWEEP), *extra, "--binary", args.nertrain],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def refused(args, work, space_text, says, *extra):
    """A sweep whose inputs are wrong: refused before Ray starts or any run is written."""
    space = work / "space.toml"
    space.write_text(space_text)
    storage = work / "refused"
    done = sweep(args, "run", "--experiment", str(args.experiment), "--space", str(space),
                 "--storage", str(storage), "--name", "bad", "--address", args.address, *extra, timeout=120)
    check(done.returncode != 0 and says in done.stderr, f"expected an error saying {says!r}: {done.stderr[-800:]}")
    check(not storage.exists(), f"a refused sweep wrote {storage}")
    return done.stderr.strip().splitlines()[-1]


def bad_spaces(args, work):
    errors = [
        refused(args, work, '[space]\n"train.lrr" = { uniform = [0.01, 0.02] }\n', "unknown key `train.lrr`"),
        refused(args, work, '[space]\n"model.hidden" = { uniform = [20.0, 60.0] }\n', "model.hidden"),
        refused(args, work, '[space]\n', "empty"),
        refused(args, work, '[space]\n"train.lr" = { loguniform = [0.0, 0.1] }\n', "above 0"),
        refused(args, work, '[space]\n"train.lr" = { uniform = [0.1, 0.01] }\n', "not below"),
        refused(args, work, '[space]\n"train.lr" = { normal = [0.1, 0.01] }\n', "expected one of"),
    ]
    space = '[space]\n"train.lr" = { uniform = [0.01, 0.02] }\n'
    errors.append(refused(args, work, space, "does not answer", "--address", "127.0.0.1:9"))
    return errors


def nodes(address):
    """(head node id, second node id) of the cluster."""
    import ray
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        alive = [n for n in ray.nodes() if n["Alive"]]
    finally:
        ray.shutdown()
    check(len(alive) == 2, f"expected 2 nodes, found {len(alive)}")
    head = [n["NodeID"] for n in alive if "node:__internal_head__" in n["Resources"]]
    check(len(head) == 1, "no head node")
    return head[0], next(n["NodeID"] for n in alive if n["NodeID"] != head[0])


def results(tune_dir):
    """Each trial's results so far, by trial id, from Tune's result files."""
    out = {}
    for path in tune_dir.glob("*/result.json"):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if lines:
            out[lines[0]["trial_id"]] = lines
    return out


def lose_node(pids):
    """Stops a node's processes (its raylet and what it started) at once."""
    tree, frontier = set(), list(pids)
    while frontier:
        pid = frontier.pop()
        if pid in tree:
            continue
        tree.add(pid)
        children = Path(f"/proc/{pid}/task/{pid}/children")
        if children.exists():
            frontier.extend(int(c) for c in children.read_text().split())
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(tree)


def start_sweep(args, work, name, space, *extra, sweep_name=None):
    storage = work / "sweeps"
    process = subprocess.Popen(
        [sys.executable, str(SWEEP), "run", "--experiment", str(args.experiment), "--space", str(space),
         "--storage", str(storage), "--name", sweep_name or name, "--address", args.address,
         "--binary", args.nertrain, *extra],
        stdout=open(work / f"{name}.out", "w"), stderr=subprocess.STDOUT, cwd=ROOT)
    return process, storage / (sweep_name or name)


def ended(process, work, name):
    check(process.wait(600) == 0, f"the sweep failed: {(work / f'{name}.out').read_text()[-3000:]}")


def fits_of(runs):
    """The pids of `nertrain fit` processes writing under `runs`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and b"fit" in command and any(str(runs).encode() in c for c in command):
            found.append(int(proc.name))
    return found


def asha(args, work):
    """ASHA on both nodes, its driver killed mid-way and the sweep resumed: no fit outlives its
    trial, trials that trail are stopped and leave runs `eval` reads, and the best experiment
    runs as is."""
    started = time.monotonic()
    process, home = start_sweep(args, work, "asha", args.space)
    deadline = time.monotonic() + 300
    while not any(lines[-1].get("epoch", 0) >= 2 for lines in results(home / "tune").values()):
        check(time.monotonic() < deadline and process.poll() is None, "no trial reached its second epoch")
        time.sleep(0.2)
    # While its driver runs, the sweep cannot be resumed beside it.
    beside, _ = start_sweep(args, work, "asha-beside", args.space, "--resume", sweep_name="asha")
    beside.wait(120)
    said = (work / "asha-beside.out").read_text()
    check(beside.returncode != 0 and "a driver runs this sweep still" in said, f"resumed beside its driver: {said[-800:]}")
    process.kill()
    process.wait()
    deadline = time.monotonic() + 60
    while fits_of(home / "runs"):
        check(time.monotonic() < deadline, f"fit outlived the killed sweep: pids {fits_of(home / 'runs')}")
        time.sleep(0.5)
    # Resumed with another space: refused, not run with the old one under the new one's columns.
    other, _ = start_sweep(args, work, "asha-other", args.space_lost, "--resume", sweep_name="asha")
    other.wait(120)
    said = (work / "asha-other.out").read_text()
    check(other.returncode != 0 and "the space differs" in said, f"resumed with another space: {said[-800:]}")
    process, _ = start_sweep(args, work, "asha", args.space, "--resume")
    ended(process, work, "asha")
    trials = {row["trial"]: row for row in json.loads((home / "trials.json").read_text())}
    stopped = [t for t, row in trials.items() if row["state"] == "stopped"]
    finished = [t for t, row in trials.items() if row["state"] == "finished"]
    check(stopped and finished, f"expected trials stopped and finished: {[(t, r['state']) for t, r in trials.items()]}")
    for trial in stopped:
        evaluated = subprocess.run([args.nertrain, "eval", "--model", str(home / "runs" / trial), "--data",
                                    "data/sample/dev.txt"], capture_output=True, text=True, cwd=ROOT)
        check(evaluated.returncode == 0, f"the stopped trial {trial} left no valid run: {evaluated.stderr}")
    best = home / "best.toml"
    checked = subprocess.run([args.nertrain, "fit", "--config", str(best), "--check"], capture_output=True, cwd=ROOT)
    check(checked.returncode == 0, f"{best} does not run as is: {checked.stderr}")
    check(len(trials) == 4, f"the resumed sweep has {len(trials)} trials, not 4")
    return {"seconds": round(time.monotonic() - started, 1), "trials": len(trials), "stopped": len(stopped),
            "table": (home / "trials.md").read_text()}


def failed_trial(args, work):
    """A trial that fails past --max-failures: the sweep writes its tables and exits 1."""
    space = work / "space-failing.toml"
    space.write_text('[space]\n"data.train" = { grid = ["no/such/train.txt"] }\n')
    process, home = start_sweep(args, work, "failing", space, "--scheduler", "none", "--max-failures", "0")
    process.wait(300)
    said = (work / "failing.out").read_text()
    check(process.returncode == 1 and "1 of 1 trials failed" in said, f"a sweep that failed a trial: {said[-800:]}")
    check("| failed |" in (home / "trials.md").read_text(), "trials.md does not say the trial failed")
    return said.strip().splitlines()[-1]


def lost_node(args, work, second):
    """Every trial to its end (no scheduler), one a node: the second node is lost while its
    trial runs; Tune restores the trial on the head and its model is an uninterrupted run's."""
    process, home = start_sweep(args, work, "lost-node", args.space_lost, "--scheduler", "none")
    tune_dir = home / "tune"
    victim = None
    deadline = time.monotonic() + 300
    while victim is None:
        check(time.monotonic() < deadline, "no trial ran three epochs on the second node")
        check(process.poll() is None, f"the sweep ended before the node was lost: {(work / 'lost-node.out').read_text()[-2000:]}")
        for trial, lines in results(tune_dir).items():
            last = lines[-1]
            if last.get("node") == second and last.get("epoch", 0) >= 3 and not last.get("finished"):
                victim = trial
        time.sleep(0.2)
    killed = lose_node(args.second_node_pids)
    at_epoch = results(tune_dir)[victim][-1]["epoch"]
    print(f"lost the second node ({killed} processes) while trial {victim} ran, at epoch {at_epoch}", file=sys.stderr)
    ended(process, work, "lost-node")
    trials = {row["trial"]: row for row in json.loads((home / "trials.json").read_text())}
    restored = results(tune_dir)[victim]
    check(restored[-1].get("finished") and trials[victim]["state"] == "finished",
          f"trial {victim} did not finish after its node was lost: {restored[-1]}")
    check(restored[-1].get("node") != second, "the restored trial ran on the lost node")
    # The restored trial's model against an uninterrupted fit of its configuration.
    alone = work / "uninterrupted"
    command = [args.nertrain, "fit", "--config", str(args.experiment)]
    for key, value in sorted(trials[victim]["config"].items()):
        command += ["--set", f"{key}={json.dumps(value)}"]
    command += ["--set", f"train.output={json.dumps(str(alone))}"]
    subprocess.run(command, check=True, capture_output=True, cwd=ROOT, env={**os.environ, "RAYON_NUM_THREADS": "1"})
    run = home / "runs" / victim
    for name in ("model.bpk", "dev.json", "vocab.json", "metrics.jsonl"):
        check((run / name).read_bytes() == (alone / name).read_bytes() or name == "metrics.jsonl" and
              same_metrics(run / name, alone / name),
              f"{name} of the restored trial differs from an uninterrupted run's")
    return {"restored": victim, "lost_at_epoch": at_epoch, "epochs": trials[victim]["epochs"]}


def same_metrics(a, b):
    """Two metrics files that agree but for the seconds and speeds each epoch took."""
    timing = ("train_seconds", "eval_seconds", "sentences_per_second", "tokens_per_second")
    read = lambda p: [{k: v for k, v in json.loads(l).items() if k not in timing} for l in p.read_text().splitlines()]
    return read(a) == read(b)


def docs_example(args):
    """usage.md's example, as written (the cluster found by Ray itself), into runs/sweeps/try."""
    home = ROOT / "runs" / "sweeps" / "try"
    check(not home.exists(), f"{home} is there already: move it away to run this test")
    try:
        done = subprocess.run([sys.executable, "scripts/ray/sweep.py", "run", "--experiment", "configs/sample.toml",
                               "--space", "configs/sweeps/sample.toml", "--name", "try", "--binary", args.nertrain],
                              capture_output=True, text=True, cwd=ROOT, timeout=600)
        check(done.returncode == 0, f"usage.md's sweep failed: {done.stderr[-2000:]}")
        rows = json.loads((home / "trials.json").read_text())
        check(len(rows) == 4 and (home / "best.toml").exists(), f"usage.md's sweep: {rows}")
        # Its best configuration confirmed on two seeds beside the experiment as it is.
        done = subprocess.run([sys.executable, "scripts/ray/sweep.py", "confirm", "--experiment", "configs/sample.toml",
                               "--name", "try", "--top", "1", "--seeds", "1", "2", "--binary", args.nertrain],
                              capture_output=True, text=True, cwd=ROOT, timeout=600)
        check(done.returncode == 0, f"confirm failed: {done.stderr[-2000:]}")
        table = (home / "confirm.md").read_text().splitlines()
        check(len(table) == 4 and table[2].startswith("| experiment as it is") and rows[0]["trial"] in table[3],
              f"confirm.md: {table}")
        check((home / "expected-best.svg").read_text().startswith("<svg"), "no expected-best.svg")
        return {"trials": len(rows), "best_dev_f1": rows[0]["best_dev_f1"], "confirm": table[2:]}
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(ROOT / "runs" / "sweeps" / "try-best", ignore_errors=True)


def wait_for_binary(path, timeout=2400):
    """The path once a file is there: CI moves the wgpu build's binary into place when it is done."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        check(time.monotonic() < deadline, f"{path} did not appear within {timeout} s")
        time.sleep(2)
    return str(path)


def gpu_trials(args, work, head):
    """Two trials sharing the head's GPU, on wgpu; or, from a binary built without wgpu, a refusal
    before Ray starts."""
    space = work / "space-gpu.toml"
    space.write_text('[space]\n"train.lr" = { grid = [0.015, 0.02] }\n')
    storage = work / "gpu"
    nertrain = wait_for_binary(Path(args.nertrain_gpu))
    probe = subprocess.run([nertrain, "fit", "--config", "configs/sample.toml", "--set", 'train.backend="wgpu"',
                            "--check"], capture_output=True, cwd=ROOT)
    done = sweep(argparse.Namespace(**{**vars(args), "nertrain": nertrain}), "run", "--experiment",
                 "configs/sample.toml", "--set", "train.epochs=2", "--space", str(space),
                 "--storage", str(storage), "--name", "gpu", "--address", args.address, "--scheduler", "none",
                 "--gpus-per-trial", "0.5")
    if probe.returncode != 0:
        check(done.returncode != 0 and "--features wgpu" in done.stderr and not storage.exists(),
              f"a binary without wgpu was not refused before the sweep: {done.stderr[-800:]}")
        return {"refused": done.stderr.strip().splitlines()[-1]}
    check(done.returncode == 0, f"the GPU sweep failed: {done.stderr[-2000:]}")
    home = storage / "gpu"
    rows = json.loads((home / "trials.json").read_text())
    check(len(rows) == 2 and all(r["state"] == "finished" for r in rows), f"GPU trials: {rows}")
    for run in (home / "runs").iterdir():
        if run.is_dir():
            check('backend = "wgpu"' in (run / "config.toml").read_text(), f"{run} did not train on wgpu")
    on = {result[-1]["node"] for result in results(home / "tune").values()}
    check(on == {head}, f"GPU trials ran on {on}, not on the head, the node with the GPU")
    check("GPU-seconds" in (home / "trials.md").read_text(), "trials.md does not say the GPU time")
    return {"trials": len(rows), "best_dev_f1": rows[0]["best_dev_f1"]}


def ray_data(args, work):
    """The sample's raw text tagged on Ray Data against tag --input: one tagger (an actor with a
    CPU of one node) and the reading of the input's splits on the other node's CPU."""
    model = work / "model"
    subprocess.run([args.nertrain, "fit", "--config", "configs/sample.toml", "--set", "train.epochs=2",
                    "--set", 'data.context="sentence"', "--set", f"train.output={json.dumps(str(model))}"],
                   check=True, capture_output=True, cwd=ROOT)
    text = ROOT / "data" / "sample" / "rawtext.txt"
    out = work / "ray-tagged"
    subprocess.run([sys.executable, "scripts/ray/ray_tag.py", "--model", str(model), "--input", str(text),
                    "--output", str(out), "--workers", "1", "--address", args.address, "--split-bytes", "2000"],
                   check=True, capture_output=True, cwd=ROOT, timeout=180)
    cli = subprocess.run([args.nertrain, "tag", "--model", str(model), "--input", str(text), "--format", "json"],
                         check=True, capture_output=True, text=True, cwd=ROOT).stdout.splitlines()
    tagged = {}
    for path in out.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            tagged[record.pop("id")] = record
    check(len(tagged) == len(cli), f"Ray tagged {len(tagged)} lines of {len(cli)}")
    spans = lambda r: [(e["start"], e["end"], e["label"]) for e in r["entities"]]
    differ = [i for i, line in enumerate(cli) if spans(tagged[i]) != spans(json.loads(line))]
    check(not differ, f"Ray Data's entities differ from tag --input's on lines {differ[:10]}")
    return {"lines": len(cli)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nertrain", required=True)
    parser.add_argument("--nertrain-gpu", help="the binary the GPU trials run (default --nertrain); waited for")
    parser.add_argument("--address", required=True)
    parser.add_argument("--experiment", type=Path, required=True)
    parser.add_argument("--space", type=Path, required=True, help="the ASHA sweep's space")
    parser.add_argument("--space-lost", type=Path, required=True, help="the space of the sweep that loses a node")
    parser.add_argument("--second-node-pids", type=int, nargs="+", required=True)
    parser.add_argument("--results", required=True)
    args = parser.parse_args()
    args.nertrain_gpu = args.nertrain_gpu or args.nertrain
    work = Path(tempfile.mkdtemp(prefix="nertrain-ray-"))
    passed = False
    try:
        report = {"errors": bad_spaces(args, work)}
        report["ray_data"] = ray_data(args, work)
        report["docs_example"] = docs_example(args)
        head, second = nodes(args.address)
        report["asha"] = asha(args, work)
        report["failed_trial"] = failed_trial(args, work)
        report["gpu_trials"] = gpu_trials(args, work, head)
        report["lost_node"] = lost_node(args, work, second)
        Path(args.results).write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2))
        passed = True
    finally:
        if passed:
            shutil.rmtree(work)
        else:
            print(f"kept for a look: {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
