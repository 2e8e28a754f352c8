#!/usr/bin/env bash
# The counter code's cost on the CPU target (no GPU): builds the benchmark and corpus programs
# instrumented for the CPU target, runs each with its clones and with its original kernels,
# compares the interpreter's exact counts and times, and the sm_90 occupancy from ptxas -v.
#   cargo build --release --workspace && benchmarks/cost.sh [--out PATH.md] [--runs N] ...
# See benchmarks/cost.py (or --help) and benchmarks/README.md.
exec python3 "$(dirname "$0")/cost.py" "$@"
