#!/usr/bin/env bash
# Long fuzz runs of the files users hand us (tests/robustness/fuzz.py): mutated LM and codec GGUFs, .ovrq
# codes, voice .npz files and WAVs, each loaded and used in a worker process. Files that crash,
# hang or raise anything but a clean ValueError/TypeError are kept under OUT_DIR; exit 1 if any.
#
# Usage: scripts/fuzz.sh [SECONDS (default 600)] [OUT_DIR (default fuzz-out)] [extra tests/robustness/fuzz.py args]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-600}
OUT=${2:-fuzz-out}
shift $(( $# > 2 ? 2 : $# ))
exec .venv/bin/python -P tests/robustness/fuzz.py --seconds "$SECONDS_TO_RUN" --out "$OUT" "$@"
