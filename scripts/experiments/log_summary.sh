#!/usr/bin/env bash
# The summary lines of a `nertrain fit` log: the data line, one line per epoch, the early stop,
# the best epoch and the test report. No corpus text is in these lines.
#   scripts/experiments/log_summary.sh fit.log > docs/results/logs/NAME.txt
set -euo pipefail
grep -E '^(train [^=]*:|document consistency|training on train and dev|epoch +[0-9]+:|interrupted|resuming|early stop|best dev|test [^=]*:|processed|accuracy|  +[A-Z]+: precision)' "$1"
