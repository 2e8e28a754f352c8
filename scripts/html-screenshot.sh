#!/usr/bin/env bash
# Renders a `cuda-flux html` page in headless Chromium and saves a screenshot, to see the page as
# a browser shows it without opening one.
#
#   scripts/html-screenshot.sh [PROFILE.json...]
#
# Without profiles, uses the synthetic ones under crates/analysis/tests/data. Writes
# target/html-screenshot/report.html and report.png, and prints their paths.
# Needs Debian's chromium package (scripts/setup.sh installs it).
set -euo pipefail

die() { printf 'html-screenshot: error: %s\n' "$*" >&2; exit 1; }

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
chromium="$(command -v chromium || command -v chromium-browser || true)"
[ -n "$chromium" ] || die "chromium is not on PATH (run scripts/setup.sh)"

if [ "$#" -eq 0 ]; then
    set -- crates/analysis/tests/data/rank0.json crates/analysis/tests/data/rank1.json
fi

out="$root/target/html-screenshot"
mkdir -p "$out"
cargo build -q -p analysis --bin cuda-flux || die "cannot build cuda-flux"
"$root/target/debug/cuda-flux" html "$@" -o "$out/report.html"
rm -f "$out/report.png"
"$chromium" --headless --no-sandbox --disable-gpu --window-size=1200,2000 \
    --screenshot="$out/report.png" "file://$out/report.html" >/dev/null 2>&1 \
    || die "chromium could not render $out/report.html"
[ -s "$out/report.png" ] || die "chromium wrote no screenshot"
printf 'page:       %s\nscreenshot: %s (%s bytes)\n' "$out/report.html" "$out/report.png" \
    "$(stat -c %s "$out/report.png")"
