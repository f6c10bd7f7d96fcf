#!/usr/bin/env bash
# lmcp pdf against img2pdf on generated image sets, in one run (see the .py file).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check img2pdf
cargo build --release --quiet
# the binary cargo just built, wherever CARGO_TARGET_DIR puts it
python3 benches/pdf_vs_img2pdf.py "${CARGO_TARGET_DIR:-target}/release/lmcp" "${1:-3}"
