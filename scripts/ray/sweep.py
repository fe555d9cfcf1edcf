#!/usr/bin/env python3
"""Hyperparameter sweeps and seed studies of a nertrain experiment on Ray Tune.

    pip install -r scripts/ray/requirements.txt
    scripts/ray/sweep.py run --experiment configs/conll-adam.toml --space configs/sweeps/conll-adam.toml \
        --storage runs/sweeps --name adam                 # a local Ray; --address HOST:PORT for a cluster
    scripts/ray/sweep.py confirm --storage runs/sweeps --name adam --top 2 --seeds 1 2 3

A search space is a TOML file: `[space]` maps experiment keys to a distribution, `[sweep]` says
how many random draws to take and how ASHA stops trials that trail:

    [sweep]
    samples = 8                # draws of the random keys, each crossed with every grid value
    grace_epochs = 3           # ASHA: no trial is stopped before this many epochs
    reduction = 3              # ASHA: a third of the trials go on at each rung
    seed = 0                   # the draws' seed: the same space draws the same trials
    [space]
    "train.lr" = { loguniform = [0.0005, 0.005] }
    "model.dropout" = { uniform = [0.3, 0.6] }
    "model.hidden" = { choice = [100, 200] }
    "model.word_dim" = { randint = [50, 150] }       # integers, both ends included
    "train.seed" = { grid = [1, 2, 3] }              # every value, for every draw

How it runs:
1. The space is checked before any trial starts: each key and each value's type against the
   experiment, by `nertrain fit --check` (a key the experiment lacks, a float range for an
   integer setting); an empty space, a range whose ends are the wrong way round, a cluster
   address that does not answer are errors too.
2. Each trial is `nertrain fit` of the experiment with its values set (`--set`), writing its run
   directory under STORAGE/NAME/runs/, in a process of its own that never outlives the trial
   (its own process group, and a parent-death signal), with RAYON_NUM_THREADS set to the CPUs
   Ray gives the trial. With `--gpus-per-trial` (a share: 0.25 puts four trials on a GPU) each
   trial trains on wgpu, on the GPU Ray gives it (CUBECL_WGPU_DEFAULT_DEVICE=DiscreteGpu(N)
   unless the node sets that variable itself). Each epoch's line of the run's metrics.jsonl is
   reported to Tune as fit writes it (dev span F1; test scores never leave the run) with a
   checkpoint: the run directory as it stands between two system calls of fit (the process
   paused while it is copied), from which fit resumes exactly, as it does after a crash. ASHA
   stops the trials that trail on dev F1; a stopped trial's fit ends by its SIGTERM path, its
   run directory intact.
3. A trial whose node is lost is restored by Tune on another from its last checkpoint (the run
   directory put back as it was), and `fit --resume` goes on: the model it ends with is the
   one the uninterrupted trial would have written, byte for byte. A sweep stopped whole
   (Ctrl-C, a driver that died) goes on where it was with `run --resume`: the driver beats
   (STORAGE/NAME/driver.json) every second, and a trial whose driver has not beaten for
   DRIVER_GONE seconds stops its fit (which saves its run) and reports nothing more, so no fit
   trains on without a driver or rotates away the checkpoint the sweep resumes from. `--resume`
   refuses while a driver still beats, and with a space (or experiment) other than the one the
   sweep ran with (STORAGE/NAME/space.json).
4. At the end: STORAGE/NAME/trials.md, a table of the trials (values, best dev F1, epochs run,
   CPU-seconds, stopped, finished or failed), and STORAGE/NAME/best.toml, the best trial's
   experiment, which `nertrain fit --config` runs as is. A sweep with a failed trial (past
   --max-failures) exits 1 after writing them.

`confirm` retrains the `--top` best configurations on each of `--seeds` (and the experiment as
it is, for comparison) as Ray tasks, and writes STORAGE/NAME/confirm.md: mean ± std of dev and
test F1 (test only reported; the ranking is by dev), and expected-best.svg, the expected best
dev F1 of a sweep of n trials drawn from this one's (Dodge et al., 2019).
"""

import argparse
import ctypes
import fcntl
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nerscripts import format_mean_std  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("uniform", "loguniform", "randint", "choice", "grid")
# Seconds without a beat of the driver after which its trials stop: many beats, so that a busy
# node is not taken for a dead driver.
DRIVER_GONE = 10


class SweepError(Exception):
    """A mistake in the sweep's inputs, named before any trial starts."""


# --- The search space -------------------------------------------------------------------------


def read_space(path):
    """The space file's keys and distributions, and its [sweep] settings, checked for shape."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SweepError(f"{path}: {e.strerror}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{path}: not TOML: {e}") from None
    unknown = set(document) - {"space", "sweep"}
    if unknown:
        raise SweepError(f"{path}: unknown section {sorted(unknown)[0]!r}; expected [space] and [sweep]")
    space = document.get("space", {})
    if not space:
        raise SweepError(f"{path}: the [space] section is empty: name at least one key to vary")
    checked = {key: check_distribution(path, key, spec) for key, spec in space.items()}
    least = {"samples": 1, "grace_epochs": 1, "reduction": 2, "seed": 0}
    settings = {"samples": 1, "grace_epochs": 2, "reduction": 3, "seed": 0, **document.get("sweep", {})}
    for name, value in settings.items():
        if name not in least:
            raise SweepError(f"{path}: [sweep] {name}: unknown; expected {', '.join(least)}")
        if not isinstance(value, int) or isinstance(value, bool) or value < least[name]:
            raise SweepError(f"{path}: [sweep] {name}: expected a whole number of at least "
                             f"{least[name]}, found {value!r}")
    return checked, settings


def check_distribution(path, key, spec):
    """One key's distribution as (kind, values), or an error naming the key."""
    where = f"{path}: [space] {key!r}"
    if "." not in key:
        raise SweepError(f"{where}: expected a section and a setting, as \"train.lr\"")
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in KINDS:
        raise SweepError(f"{where}: expected one of {', '.join(KINDS)}, as {{ uniform = [0.2, 0.5] }}")
    kind, values = next(iter(spec.items()))
    if kind in ("choice", "grid"):
        if not isinstance(values, list) or not values:
            raise SweepError(f"{where}: {kind} expects a non-empty list of values")
        return kind, values
    numbers = isinstance(values, list) and len(values) == 2 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if not numbers:
        raise SweepError(f"{where}: {kind} expects two numbers [low, high], found {values!r}")
    low, high = values
    if not low < high:
        raise SweepError(f"{where}: {kind}'s low end {low} is not below its high end {high}")
    if kind == "loguniform" and low <= 0:
        raise SweepError(f"{where}: loguniform needs a low end above 0, found {low}")
    if kind == "randint" and not all(isinstance(v, int) for v in values):
        raise SweepError(f"{where}: randint expects two whole numbers, found {values!r}")
    return kind, values


def toml_value(value):
    """A value as `--set` reads it (TOML)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return str(value)


def sets(values):
    """`--set` arguments for `values` (key → value)."""
    return [arg for key, value in sorted(values.items()) for arg in ("--set", f"{key}={toml_value(value)}")]


def check_keys(binary, experiment, space):
    """Every key and every value kind of `space` against the experiment (`--config FILE` and
    the sweep's own `--set`s), by `fit --check`: a range's ends, each choice and grid value."""
    checked = subprocess.run([binary, "fit", *experiment, "--check"], capture_output=True, text=True, cwd=ROOT)
    if checked.returncode != 0:
        raise SweepError(checked.stderr.strip().removeprefix("error: "))
    for key, (kind, values) in space.items():
        probes = values if kind in ("choice", "grid") else [
            float(v) if kind in ("uniform", "loguniform") else int(v) for v in values]
        for value in probes:
            checked = subprocess.run(
                [binary, "fit", *experiment, *sets({key: value}), "--check"],
                capture_output=True, text=True, cwd=ROOT)
            if checked.returncode != 0:
                message = checked.stderr.strip().removeprefix("error: ")
                raise SweepError(f"[space] {key!r} ({kind}): {message}")


def tune_space(space):
    """The space as Ray Tune's distributions."""
    from ray import tune
    make = {
        "uniform": lambda v: tune.uniform(*v),
        "loguniform": lambda v: tune.loguniform(*v),
        "randint": lambda v: tune.randint(v[0], v[1] + 1),
        "choice": tune.choice,
        "grid": tune.grid_search,
    }
    return {key: make[kind](values) for key, (kind, values) in space.items()}


def check_address(address):
    """A cluster address (HOST:PORT) that answers, or an error saying it does not."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise SweepError(f"--address {address}: expected HOST:PORT (the head's GCS port, 6379 by default)")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise SweepError(f"--address {address}: the cluster does not answer ({e})") from None


# --- One trial --------------------------------------------------------------------------------


def dies_with_parent():
    """In the child before exec: SIGTERM when the trial's process dies, however it dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def cpu_seconds(pid):
    """A live process's user and system CPU seconds (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reaped(child):
    """The CPU seconds a child used, once it has exited (its return code set); else None."""
    if child.returncode is not None:
        return None
    pid, status, usage = os.wait4(child.pid, os.WNOHANG)
    if pid == 0:
        return None
    child.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def snapshot(pid, run, into):
    """The run directory copied into `into` while fit is paused, so that the copy is what a crash
    at that instant would leave: a state fit resumes from exactly."""
    os.kill(pid, signal.SIGSTOP)
    try:
        shutil.copytree(run, into, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".nertrain.lock"))
    finally:
        os.kill(pid, signal.SIGCONT)


def restore(checkpoint, run):
    """The run directory put back as the checkpoint has it; how many epochs were reported, and
    the CPU seconds fit had used by then (in the processes before this one). A fit
    still ending there (its node lost, it saves on the way out) is waited for first."""
    lock = run / ".nertrain.lock"
    if lock.exists():
        with open(lock, "rb") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
    with checkpoint.as_directory() as saved:
        if run.exists():
            shutil.rmtree(run)
        shutil.copytree(saved, run)
    reported = run / "reported.json"
    saved = json.loads(reported.read_text()) if reported.exists() else {}
    reported.unlink(missing_ok=True)
    return saved.get("epochs", 0), saved.get("cpu_seconds", 0.0), saved.get("seconds", 0.0)


def trial_env(resources):
    """fit's environment in a Ray trial or task given `resources` (Ray's CPU and GPU counts):
    RAYON_NUM_THREADS its CPUs and, with a GPU, wgpu's adapter the one Ray gave it.

    Ray numbers a node's GPUs as CUDA does; wgpu counts discrete adapters in Vulkan's order. On
    one GPU the two agree; where they may not, CUBECL_WGPU_DEFAULT_DEVICE set on the nodes (as
    `DiscreteGpu(N)`, or `Cpu` for a software driver) is passed on as it is."""
    env = {**os.environ, "RAYON_NUM_THREADS": str(max(1, int(resources.get("CPU", 1))))}
    if resources.get("GPU", 0) > 0 and "CUBECL_WGPU_DEFAULT_DEVICE" not in env:
        import ray
        gpus = ray.get_gpu_ids()
        if gpus:
            env["CUBECL_WGPU_DEFAULT_DEVICE"] = f"DiscreteGpu({int(gpus[0])})"
    return env


class Driver:
    """The sweep's driver, as its beats (STORAGE/NAME/driver.json) show it. A beat is compared with
    the last one seen, by the watcher's own clock, so that clocks of other nodes do not matter."""

    def __init__(self, home):
        self.path = Path(home) / "driver.json"
        self.last = self.beat()
        self.seen = time.monotonic()

    def beat(self):
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None

    def gone(self):
        """Whether the driver has not beaten for DRIVER_GONE seconds (never, where no beat was
        ever seen: a storage this node does not share cannot tell)."""
        now = self.beat()
        if now is not None and now != self.last:
            self.last, self.seen = now, time.monotonic()
        return self.last is not None and time.monotonic() - self.seen > DRIVER_GONE


def beat_while_running(home):
    """Beats every second, in a thread of the driver, until the process ends."""
    import threading
    path = Path(home) / "driver.json"

    def beat():
        count = 0
        while True:
            count += 1
            written = path.with_suffix(".tmp")
            written.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "beat": count}))
            os.replace(written, path)
            time.sleep(1)

    threading.Thread(target=beat, daemon=True, name="driver-beat").start()


def refuse_a_running_driver(home):
    """An error when another driver still beats for the sweep in `home`."""
    driver = Driver(home)
    if driver.last is None:
        return
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if driver.beat() != driver.last:
            raise SweepError(f"--resume: a driver runs this sweep still (pid {driver.last.get('pid')} on "
                             f"{driver.last.get('host')}, {driver.path}); stop it first")


def trial(config, binary, experiment, runs):
    """One trial: `fit` of the experiment with `config` set, each epoch reported to Tune with a
    checkpoint, resumed from Tune's checkpoint when the trial is restored. It ends (its fit
    stopped, nothing more reported) when the sweep's driver stops beating."""
    import ray
    from ray import tune
    run = Path(runs) / tune.get_context().get_trial_id()
    driver = Driver(Path(runs).parent)
    node = ray.get_runtime_context().get_node_id()
    checkpoint = tune.get_checkpoint()
    reported, cpu_before, seconds_before = restore(checkpoint, run) if checkpoint else (0, 0.0, 0.0)
    env = trial_env(tune.get_context().get_trial_resources().required_resources)
    command = [binary, "fit", *experiment, *sets(config),
               "--set", f"train.output={json.dumps(str(run))}",
               "--resume" if checkpoint else "--overwrite"]
    log = open(run.parent / f"{run.name}.log", "ab")
    child = subprocess.Popen(command, stdout=log, stderr=log, cwd=ROOT, process_group=0,
                             preexec_fn=dies_with_parent, env=env)
    started = time.monotonic()
    seconds = lambda: seconds_before + time.monotonic() - started  # wall time, restores included
    cpu = 0.0
    try:
        while True:
            if driver.gone():
                raise RuntimeError(f"the sweep's driver stopped beating ({driver.path}): trial ended, "
                                   f"its run saved for `run --resume`")
            used = reaped(child)
            ended = used is not None
            cpu = used if ended else cpu
            lines = metrics(run)
            for line in lines[reported:]:
                reported += 1
                if not ended:
                    cpu = cpu_seconds(child.pid) or cpu
                with tempfile.TemporaryDirectory() as saved:
                    if not ended:
                        snapshot(child.pid, run, saved)
                    else:
                        shutil.copytree(run, saved, dirs_exist_ok=True,
                                        ignore=shutil.ignore_patterns(".nertrain.lock"))
                    wall = seconds()
                    Path(saved, "reported.json").write_text(
                        json.dumps({"epochs": reported, "cpu_seconds": cpu_before + cpu, "seconds": wall}))
                    tune.report({"epoch": line["epoch"], "dev_f1": line["dev_f1"], "loss": line["loss"],
                                 "cpu_seconds": cpu_before + cpu, "seconds": wall, "finished": False,
                                 "node": node},
                                checkpoint=tune.Checkpoint.from_directory(saved))
            if ended:
                break
            time.sleep(0.5)
        if child.returncode != 0:
            raise RuntimeError(f"nertrain fit exited with {child.returncode}: see {run}.log")
        # The outcome, as one more result (every result carries the metric the scheduler reads).
        dev = json.loads((run / "dev.json").read_text())
        tune.report({"epoch": len(metrics(run)), "dev_f1": dev["overall"]["f1"],
                     "cpu_seconds": cpu_before + cpu, "seconds": seconds(),
                     "finished": True, "epochs": len(metrics(run)), "node": node})
    finally:
        # Stopped by the scheduler (or failing): fit saves its run on SIGTERM and exits.
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(60)
            except subprocess.TimeoutExpired:
                child.kill()
        log.close()


def metrics(run):
    """The run's metrics.jsonl, a line per epoch committed."""
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- The sweep --------------------------------------------------------------------------------


def start_ray(address):
    import ray
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    else:
        ray.init(logging_level="ERROR", log_to_driver=False, include_dashboard=False)


def run_sweep(options):
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler
    from ray.tune.search import BasicVariantGenerator
    space, settings = read_space(options.space)
    experiment = experiment_args(options)
    check_keys(options.binary, experiment, space)
    epochs = experiment_epochs(options.binary, experiment, space)
    if options.address:
        check_address(options.address)
    home = Path(options.storage).resolve() / options.name
    tune_dir = home / "tune"
    recorded = {"experiment": experiment, "space": space, "sweep": settings}
    if options.resume:
        if not tune_dir.exists():
            raise SweepError(f"--resume: {tune_dir} holds no sweep to resume")
        check_same_sweep(home, recorded)
        refuse_a_running_driver(home)
    elif tune_dir.exists():
        raise SweepError(f"{tune_dir}: a sweep is there already; --resume it, or choose another --name")
    runs = home / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    if not options.resume:
        (home / "space.json").write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
    beat_while_running(home)
    start_ray(options.address)
    trainable = tune.with_resources(
        tune.with_parameters(trial, binary=str(Path(options.binary).resolve()), experiment=experiment,
                             runs=str(runs)),
        resources(options))
    scheduler = FIFOScheduler() if options.scheduler == "none" else ASHAScheduler(
        # Each epoch is a result, and the outcome one more.
        time_attr="training_iteration", max_t=epochs + 1, grace_period=min(settings["grace_epochs"], epochs),
        reduction_factor=settings["reduction"])
    if options.resume:
        tuner = tune.Tuner.restore(str(tune_dir), trainable=trainable, resume_errored=True)
    else:
        tuner = tune.Tuner(
            trainable, param_space=tune_space(space),
            tune_config=tune.TuneConfig(metric="dev_f1", mode="max", scheduler=scheduler,
                                        num_samples=settings["samples"],
                                        search_alg=BasicVariantGenerator(random_state=settings["seed"])),
            run_config=tune.RunConfig(name="tune", storage_path=str(home), verbose=0,
                                      failure_config=tune.FailureConfig(max_failures=options.max_failures),
                                      checkpoint_config=tune.CheckpointConfig(num_to_keep=2)))
    grid = tuner.fit()
    summarize(options, home, grid, list(space))
    if grid.errors:
        raise SweepError(f"{len(grid.errors)} of {len(grid)} trials failed (see {home / 'trials.md'}): "
                         f"{str(grid.errors[0]).strip().splitlines()[-1]}")


def check_same_sweep(home, recorded):
    """An error when `recorded` (the experiment, space and sweep settings given now) is not what
    the sweep in `home` ran with: a resumed sweep goes on with its own trials."""
    path = home / "space.json"
    if not path.exists():
        raise SweepError(f"--resume: {path} is missing: the sweep's space is unknown, so it cannot be resumed")
    ran = json.loads(path.read_text())
    given = json.loads(json.dumps(recorded))
    for part in ("experiment", "space", "sweep"):
        if ran.get(part) != given[part]:
            raise SweepError(f"--resume: the {part} differs from the one the sweep ran with ({path}: "
                             f"{json.dumps(ran.get(part))}, given {json.dumps(given[part])}); resume with "
                             f"the same, or start another --name")


def experiment_args(options):
    """The experiment as `fit` is given it: its file, and the settings every trial shares (on a
    GPU, the wgpu backend)."""
    shared = [*options.set, *(['train.backend="wgpu"'] if options.gpus_per_trial > 0 else [])]
    return ["--config", str(Path(options.experiment).resolve()),
            *[arg for setting in shared for arg in ("--set", setting)]]


def resources(options):
    """What Ray gives each trial (and each confirmation fit)."""
    return {"CPU": options.cpus_per_trial, **({"GPU": options.gpus_per_trial} if options.gpus_per_trial > 0 else {})}


def experiment_epochs(binary, experiment, space):
    """The most epochs a trial may run: the experiment's, or the space's largest."""
    resolved = subprocess.run([binary, "fit", *experiment, "--check"],
                              capture_output=True, text=True, cwd=ROOT, check=True).stdout
    epochs = tomllib.loads(resolved)["train"]["epochs"]
    kind, values = space.get("train.epochs", (None, None))
    if kind in ("choice", "grid"):
        epochs = max(values)
    elif kind == "randint":
        epochs = values[1]
    return epochs


def summarize(options, home, grid, keys):
    """trials.md and best.toml from the finished sweep."""
    rows = []
    for result in grid:
        last = result.metrics or {}
        history = result.metrics_dataframe
        best = float(history["dev_f1"].max()) if history is not None and "dev_f1" in history else float("nan")
        cpu, seconds = (float(history[column].max()) if history is not None and column in history else 0.0
                        for column in ("cpu_seconds", "seconds"))
        state = "finished" if last.get("finished") else ("failed" if result.error else "stopped")
        rows.append({"trial": last.get("trial_id", Path(result.path).name), "config": result.config, "best_dev_f1": best,
                     "epochs": last.get("epochs") if last.get("finished")
                     else int(last.get("training_iteration", 0)), "cpu_seconds": cpu, "seconds": seconds,
                     "state": state})
    rows.sort(key=lambda r: -r["best_dev_f1"] if not math.isnan(r["best_dev_f1"]) else math.inf)
    lines = ["| trial | " + " | ".join(keys) + " | best dev F1 | epochs | CPU s | wall s | state |",
             "|---|" + "---|" * len(keys) + "---:|---:|---:|---:|---|"]
    for r in rows:
        values = " | ".join(format_value(r["config"].get(k)) for k in keys)
        lines.append(f"| {r['trial']} | {values} | {r['best_dev_f1']:.2f} | {r['epochs']} | "
                     f"{r['cpu_seconds']:.0f} | {r['seconds']:.0f} | {r['state']} |")
    total = sum(r["cpu_seconds"] for r in rows)
    lines.append(f"\n{len(rows)} trials, {total:.0f} CPU-seconds ({total / 3600:.2f} CPU-hours) in fit.")
    if options.gpus_per_trial > 0:
        held = sum(r["seconds"] for r in rows) * options.gpus_per_trial
        lines.append(f"GPU held: {held:.0f} GPU-seconds ({held / 3600:.2f} GPU-hours) at "
                     f"{options.gpus_per_trial:g} GPU a trial.")
    (home / "trials.md").write_text("\n".join(lines) + "\n")
    (home / "trials.json").write_text(json.dumps(rows, indent=2) + "\n")
    best = rows[0]
    output = Path(options.storage) / f"{options.name}-best"
    resolved = subprocess.run(
        [options.binary, "fit", *experiment_args(options), *sets(best["config"]),
         "--set", f"train.output={json.dumps(str(output))}", "--check"],
        capture_output=True, text=True, cwd=ROOT, check=True).stdout
    (home / "best.toml").write_text(f"# The best trial of sweep {options.name} ({best['trial']}, dev F1 "
                                    f"{best['best_dev_f1']:.2f}): {' '.join([options.experiment, *options.set])} with "
                                    f"{json.dumps(best['config'])}\n{resolved}")
    print("\n".join(lines))
    print(f"\nbest: {home / 'best.toml'}")


def format_value(value):
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# --- Confirmation -----------------------------------------------------------------------------


def confirm(options):
    """The --top best trials' configurations and the experiment as it is, each on --seeds."""
    import ray
    home = Path(options.storage).resolve() / options.name
    rows = json.loads((home / "trials.json").read_text())
    candidates = [("experiment as it is", {})] + [(r["trial"], {k: v for k, v in r["config"].items()
                                                                   if k != "train.seed"})
                                                  for r in rows[: options.top]]
    if options.address:
        check_address(options.address)
    start_ray(options.address)
    wanted = resources(options)
    fit_remote = ray.remote(num_cpus=wanted["CPU"], num_gpus=wanted.get("GPU", 0))(confirm_fit)
    jobs = {(name, seed): fit_remote.remote(options.binary, experiment_args(options),
                                            {**config, "train.seed": seed},
                                            str(home / "confirm" / f"{name.replace(' ', '-')}-seed{seed}"),
                                            wanted)
            for name, config in candidates for seed in options.seeds}
    scores = {key: ray.get(job) for key, job in jobs.items()}
    lines = ["| configuration | dev F1 | test F1 | per seed (dev / test) |", "|---|---:|---:|---|"]
    for name, config in candidates:
        runs = [scores[(name, seed)] for seed in options.seeds]
        dev, test = [r["dev"] for r in runs], [r["test"] for r in runs]
        per_seed = ", ".join(f"{s}: {d:.2f} / {t:.2f}" for s, d, t in zip(options.seeds, dev, test))
        lines.append(f"| {name} {json.dumps(config) if config else ''} | {format_mean_std(dev)} | {format_mean_std(test)} "
                     f"| {per_seed} |")
    (home / "confirm.md").write_text("\n".join(lines) + "\n")
    expected_best_plot([r["best_dev_f1"] for r in rows if not math.isnan(r["best_dev_f1"])],
                       home / "expected-best.svg")
    print("\n".join(lines))


def confirm_fit(binary, experiment, config, output, wanted):
    """One confirmation fit: its best dev F1 and that model's test F1."""
    subprocess.run([binary, "fit", *experiment, *sets(config),
                    "--set", f"train.output={json.dumps(output)}", "--overwrite"],
                   check=True, capture_output=True, cwd=ROOT, env=trial_env(wanted))
    dev = json.loads(Path(output, "dev.json").read_text())["overall"]["f1"]
    test_file = Path(output, "test.json")
    test = json.loads(test_file.read_text())["overall"]["f1"] if test_file.exists() else float("nan")
    return {"dev": dev, "test": test}


def expected_best(values, n):
    """The expected best of n trials drawn with replacement from `values` (Dodge et al., 2019)."""
    ordered = sorted(values)
    count = len(ordered)
    return sum(v * ((i / count) ** n - ((i - 1) / count) ** n) for i, v in enumerate(ordered, 1))


def expected_best_plot(values, path):
    """An SVG of the expected best dev F1 against the number of trials."""
    if not values:
        return
    points = [(n, expected_best(values, n)) for n in range(1, len(values) + 1)]
    low, high = min(p[1] for p in points), max(p[1] for p in points)
    span = (high - low) or 1.0
    width, height, pad = 480, 300, 50
    x = lambda n: pad + (n - 1) / max(1, len(points) - 1) * (width - 2 * pad)
    y = lambda v: height - pad - (v - low) / span * (height - 2 * pad)
    line = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in points)
    path.write_text(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        f'font-size="12"><rect width="100%" height="100%" fill="white"/>'
        f'<polyline points="{line}" fill="none" stroke="#1f77b4" stroke-width="2"/>'
        f'<text x="{pad}" y="{height - 15}">trials: 1 to {len(points)}</text>'
        f'<text x="5" y="{pad - 20}">expected best dev F1: {low:.2f} to {high:.2f}</text></svg>\n')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "confirm"):
        command = commands.add_parser(name)
        command.add_argument("--experiment", required=True, help="the experiment TOML the trials vary")
        command.add_argument("--storage", default="runs/sweeps", help="where sweeps keep their files")
        command.add_argument("--name", required=True, help="the sweep's name: STORAGE/NAME")
        command.add_argument("--address", help="an existing Ray cluster's HOST:PORT (default: a local Ray)")
        command.add_argument("--cpus-per-trial", type=int, default=1)
        command.add_argument("--gpus-per-trial", type=float, default=0,
                             help="a GPU share for each trial (0.25: four trials to a GPU): fit on wgpu, "
                                  "on the GPU Ray gives it; the binary needs --features wgpu")
        command.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                             help="a setting of the experiment every trial shares (as fit --set)")
        command.add_argument("--binary", default=str(Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
                                                     / "release" / "nertrain"))
        if name == "run":
            command.add_argument("--space", required=True, help="the search space (TOML)")
            command.add_argument("--scheduler", choices=["asha", "none"], default="asha",
                                 help="asha stops trials that trail; none runs every trial to its end")
            command.add_argument("--max-failures", type=int, default=3,
                                 help="times a trial is restored after a lost node or a failure")
            command.add_argument("--resume", action="store_true", help="go on with a sweep stopped whole")
        else:
            command.add_argument("--top", type=int, default=2)
            command.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    options = parser.parse_args()
    try:
        if options.gpus_per_trial < 0:
            raise SweepError(f"--gpus-per-trial {options.gpus_per_trial:g}: expected 0 or more")
        if not Path(options.binary).exists():
            raise SweepError(f"--binary {options.binary}: no such file (cargo build --release)")
        run_sweep(options) if options.command == "run" else confirm(options)
    except SweepError as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
