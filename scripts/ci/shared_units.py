#!/usr/bin/env python3
"""Whether the builds `.ci/run` makes share their compiled crates, read from cargo's unit graphs.

Cargo compiles a crate once per feature set (and profile). The workspace's test build, the wheel
maturin builds from `crates/python` alone, and the wgpu build of the backends test each resolve
features on their own; where a shared crate gets other features in one of them, it and every
crate above it compile again. `crates/workspace-hack` turns the union on in all of them; this
check fails, naming the crate and its features in each build, when an upgrade brings them apart.
Only the crates whose features name a backend (Burn's and ours) may differ.

It prints how many units each build adds over the builds before it. Nothing is built: the
graphs come from `cargo --unit-graph` (unstable, enabled with RUSTC_BOOTSTRAP=1), a few seconds.

    scripts/ci/shared_units.py
"""

import hashlib
import json
import os
import subprocess
import sys

# The builds of `.ci/run`, in its order (clippy lints our crates inside them, scripts/ci/lint.sh,
# which changes no unit). maturin runs `cargo rustc --lib` on crates/python with
# arguments for the last unit only, which is the same package with the same features as here.
BUILDS = {
    "test": ["test", "--release", "--workspace"],
    "wheel": ["build", "--release", "-p", "nertrain-python", "--lib", "--features", "failpoints"],
    "backends": ["test", "--release", "-p", "nertrain-cli", "--features", "wgpu,ndarray", "--test", "backends",
                 "--config", ".ci/wgpu-stack.toml"],
}

# Crates whose features are the backends (or our failpoints): these differ by design.
BACKEND_FEATURED = {"burn", "burn-backend", "burn-core", "burn-dispatch", "burn-tensor"}


def unit_graph(args):
    """The units of one build, each under a key that tells it apart as cargo's fingerprint does."""
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    command = ["cargo", *args, "--unit-graph", "-Z", "unstable-options"]
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr}")
    units = json.loads(result.stdout)["units"]
    keys = [None] * len(units)

    def key(index):
        if keys[index] is None:
            unit = units[index]
            deps = sorted(key(dep["index"]) for dep in unit["dependencies"])
            fields = json.dumps([unit["pkg_id"], unit["target"]["kind"], unit["target"]["name"],
                                 unit["mode"], unit["features"], unit["profile"], deps])
            keys[index] = hashlib.sha256(fields.encode()).hexdigest()
        return keys[index]

    return units, {key(i) for i in range(len(units))}


def host_units(units):
    """Indices of the units built for the host: build scripts, proc macros and what they use."""
    host = set()
    stack = [i for i, u in enumerate(units)
             if u["mode"] == "build" and (u["target"]["kind"] in (["custom-build"], ["proc-macro"]))]
    while stack:
        i = stack.pop()
        if i not in host:
            host.add(i)
            stack.extend(dep["index"] for dep in units[i]["dependencies"])
    return host


def libraries(units):
    """Each library's features and profile, by package and side (host or target)."""
    host = host_units(units)
    found = {}
    for i, unit in enumerate(units):
        if unit["mode"] != "build" or unit["target"]["kind"] == ["custom-build"]:
            continue
        if not set(unit["target"]["kind"]) & {"lib", "rlib", "proc-macro"}:
            continue
        side = "host" if i in host else "target"
        name, version = unit["pkg_id"].split("#")[-1].rsplit("@", 1)
        found.setdefault((name, version, side), set()).add(
            (tuple(unit["features"]), unit["profile"]["opt_level"]))
    return found


def drift(builds):
    """Lines naming each shared library whose features or profile differ from the first build's."""
    problems = []
    names = list(builds)
    for index, later in enumerate(names):
        for lib in sorted(builds[later]):
            name, version, side = lib
            if name.startswith("nertrain-") or name in BACKEND_FEATURED:
                continue
            first = next((b for b in names[:index] if lib in builds[b]), None)
            if first is not None and builds[first][lib] != builds[later][lib]:
                problems.append(f"{name} {version} ({side}): the {first} build has "
                                f"{describe(builds[first][lib])}, the {later} build {describe(builds[later][lib])}")
    return problems


def describe(variants):
    return "; ".join(f"features [{', '.join(features)}] at opt-level {opt}"
                     for features, opt in sorted(variants))


def main():
    seen = set()
    libs = {}
    for name, args in BUILDS.items():
        units, keys = unit_graph(args)
        print(f"{name}: {len(keys)} units, {len(keys - seen)} not in the builds before it")
        seen |= keys
        libs[name] = libraries(units)
    problems = drift(libs)
    if problems:
        print("Shared crates compiled more than once, with other features or profile in each build:",
              *problems, "Name the missing features in crates/workspace-hack/Cargo.toml "
              "(normal dependencies for the target, build-dependencies for the host).",
              sep="\n  ", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
