#!/usr/bin/env bash
# lmcp pdf against img2pdf on generated image sets, in one run (see the .py file).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check img2pdf
cargo build --release --quiet
python3 benches/pdf_vs_img2pdf.py target/release/lmcp "${1:-3}"
