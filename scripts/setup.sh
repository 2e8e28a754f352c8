#!/usr/bin/env bash
# Installs everything cuda-flux needs on a Debian 12 machine, idempotently:
# LLVM/clang 16, CUDA 11.8 (Debian's nvidia-cuda-toolkit, from contrib/non-free), rustfmt and clippy,
# Chromium (headless rendering check of `cuda-flux html` pages) and python3 (the benchmark and GPU
# check scripts and their tests).
# Prints what it does; fails with one clear line when something cannot be installed.
set -euo pipefail

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo: run as root to install packages"
    SUDO="sudo"
fi

# Debian packages: what must be present, and the command that proves each one is.
# cmake: the build-project corpus (corpus/builds) configures CMake projects with each driver.
PACKAGES=(clang-16 llvm-16-dev libclang-16-dev libomp-16-dev nvidia-cuda-toolkit chromium python3 cmake make)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        say "$pkg already installed"
    else
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -gt 0 ]; then
    # nvidia-cuda-toolkit lives in contrib/non-free: add a source for them when none names them.
    if [[ " ${missing[*]} " == *" nvidia-cuda-toolkit "* ]]; then
        if ! grep -rqsE '^[^#]*(Components:.*\bnon-free\b|deb .*bookworm.* non-free)' \
            /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null; then
            say "adding an apt source with the contrib and non-free components"
            $SUDO tee /etc/apt/sources.list.d/cuda-flux-contrib-non-free.sources >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
        fi
    fi
    say "apt-get update"
    $SUDO apt-get update -q >/dev/null || die "apt-get update failed"
    for pkg in "${missing[@]}"; do
        say "installing $pkg"
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "$pkg" \
            >/tmp/cuda-flux-setup-apt.log 2>&1 \
            || die "could not install $pkg (apt-get log: /tmp/cuda-flux-setup-apt.log)"
    done
fi

# Rust components.
if command -v rustup >/dev/null 2>&1; then
    for comp in rustfmt clippy; do
        if rustup component list --installed 2>/dev/null | grep -q "^$comp"; then
            say "$comp already installed"
        else
            say "installing $comp"
            rustup component add "$comp" >/dev/null 2>&1 || die "could not install rust component $comp"
        fi
    done
else
    command -v cargo >/dev/null 2>&1 || die "no Rust toolchain (cargo) found: install rustup first"
    say "no rustup: assuming rustfmt and clippy come with the toolchain"
fi

# The tools the build and tests use must now answer.
for tool in clang-16 clang++-16 llvm-dis-16 nvcc ptxas fatbinary cuobjdump chromium python3 cmake make; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not on PATH after installation"
done
[ -f /usr/lib/llvm-16/include/llvm-c/Core.h ] || die "LLVM 16 headers missing (/usr/lib/llvm-16)"
say "ready: $(clang-16 --version | head -n1); $(nvcc --version | tail -n1)"
