#!/usr/bin/env bash
# Clippy inside CI's builds (RUSTC_WORKSPACE_WRAPPER): cargo runs this in place of rustc for the
# workspace's own crates, and it compiles each with rustc as it was asked, then lints it with
# clippy (warnings denied), which only reads the crate against the dependencies just built.
# A separate `cargo clippy` would check every dependency again, minutes on a new machine, while
# this lints each crate in each feature set that CI builds: the tests, the wheel and the backends
# (there, only the crates whose code names a backend feature: NERTRAIN_LINT_ONLY).
# What rustc compiles is rustc's own output, not clippy's (clippy turns MIR optimisation off).
# Usage (by cargo): RUSTC_WORKSPACE_WRAPPER=scripts/ci/lint.sh cargo build ...
set -euo pipefail
rustc=$1
shift
# Cargo also asks the wrapper for rustc's version and the target's file names: nothing to lint.
emits=false
for arg in "$@"; do
    case $arg in
        --print* | -vV | -V | --version) exec "$rustc" "$@" ;;
        --emit=*) emits=true ;;
    esac
done
$emits || exec "$rustc" "$@"
# A build that shares its crates' code with one linted already lints only those of its crates
# whose code it compiles otherwise (NERTRAIN_LINT_ONLY: crate names, as rustc's --crate-name).
if [ -n "${NERTRAIN_LINT_ONLY:-}" ]; then
    crate=
    previous=
    for arg in "$@"; do
        [ "$previous" = --crate-name ] && crate=$arg
        previous=$arg
    done
    case " $NERTRAIN_LINT_ONLY " in
        *" $crate "*) ;;
        *) exec "$rustc" "$@" ;;
    esac
fi
"$rustc" "$@"
# The same command with its outputs in a scratch directory, as `cargo check` would write them,
# and no artifact messages: cargo reads those as "this crate's metadata is ready" and must see
# only rustc's.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
lint=()
out_dir=false
for arg in "$@"; do
    if $out_dir; then
        lint+=("$scratch")
        out_dir=false
        continue
    fi
    case $arg in
        --out-dir) lint+=("$arg") out_dir=true ;;
        --out-dir=*) lint+=("--out-dir=$scratch") ;;
        --emit=*) lint+=(--emit=metadata) ;;
        --json=*)
            json=$(echo "${arg#--json=}" | sed -E 's/(^|,)artifacts(,|$)/\1/; s/,$//')
            [ -z "$json" ] || lint+=("--json=$json")
            ;;
        *) lint+=("$arg") ;;
    esac
done
driver=$("$rustc" --print sysroot)/bin/clippy-driver
CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" "$driver" "$rustc" "${lint[@]}"
