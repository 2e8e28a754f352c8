#!/usr/bin/env bash
# All of cuda-flux's tests, none of which needs a GPU: set-up (idempotent), formatting, lints,
# the workspace's tests (they compile the CUDA corpus with clang-16 and nvcc and assemble every
# PTX we emit with ptxas), the corpus's own compile-and-link check, and the benchmark programs'
# result checks on cuda-flux's CPU target (which also runs every corpus program in the tests).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
# clang leaves an empty directory in the temporary directory for each CUDA compilation it runs
# itself (the corpus check and the tests call it directly, hundreds of times): keep them, and
# every other scratch file of the tests, in one directory removed at the end. (Its name must not
# contain `cuda-flux-`: tests look for that prefix, the drivers' work directories', in outputs.)
TMPDIR="$(mktemp -d "${TMPDIR:-/tmp}/cfx-tests.XXXXXX")"
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
# CI builds from a clean clone: cargo's incremental cache (a third of target/debug) would only
# take disk space there. A developer who wants it back sets CARGO_INCREMENTAL=1.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
echo "test: cargo fmt --check"
cargo fmt --all -- --check
echo "test: cargo clippy -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "test: the cuda-flux command builds without LLVM"
if cargo tree -p analysis --edges normal,build --prefix none | grep -Eq '^(llvm-sys|inkwell) '; then
    echo "test: crates/analysis depends on LLVM (cargo tree -p analysis -i llvm-sys shows how)" >&2
    exit 1
fi
echo "test: cargo build (the driver tests link programs with the runtime library it builds)"
cargo build --workspace --quiet
echo "test: corpus compiles and links with clang-16 and nvcc"
OUT_DIR="$(mktemp -d)" corpus/verify.sh
echo "test: benchmark programs pass their checks on the CPU target, every kernel counted; report, cost and speed arithmetic"
bash benchmarks/tests/cpu_target.sh
python3 benchmarks/tests/test_report.py
python3 benchmarks/tests/test_cost.py
python3 benchmarks/tests/test_compare_cpu.py
echo "test: the suites harness (recipes, comparison, a mini suite on the CPU target)"
python3 benchmarks/tests/test_suites.py
python3 benchmarks/tests/test_cpu_speed.py
python3 benchmarks/tests/test_cpu_time.py
python3 benchmarks/tests/test_placement_reasons.py
echo "test: cargo test"
cargo test --workspace
