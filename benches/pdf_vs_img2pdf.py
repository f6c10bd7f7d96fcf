"""Images to PDF: `lmcp pdf` against img2pdf on the same files, in one run.

Sets (generated deterministically with Pillow, seeded):
  jpeg   20 photo-like 3000x2000 JPEGs
  png    20 1600x1200 RGBA PNGs with real transparency
  mixed  EXIF orientations 0-9, an Adobe CMYK JPEG, 16-bit RGB and RGBA PNGs, grayscale,
         a palette GIF with transparency, WebP — lmcp must accept every file

For jpeg and png, against img2pdf on the same files (median wall time of RUNS runs, peak memory
as max RSS, output size, and the ratios), two ways:
  build  `lmcp call build_image_pdf` on a workspace the files were imported into beforehand
         (importing decodes each image once and prepares it; the build only copies bytes)
  pdf    `lmcp pdf FILES -o DIR`: import and build in one command, as a person would run it
Usage: python3 benches/pdf_vs_img2pdf.py LMCP_BINARY [RUNS]
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

from PIL import Image

# Runs a command in a fresh Python process (so RUSAGE_CHILDREN's max RSS is that command's alone)
# and times the command itself, not this wrapper's start-up.
MEASURE = "import resource, subprocess, sys, time; t = time.perf_counter(); r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE); t = time.perf_counter() - t; print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, t); sys.stderr.write(r.stderr.decode()[-500:])"


def photo(w: int, h: int, seed: int, mode: str = "RGB") -> Image.Image:
    rnd = random.Random(seed)
    small = Image.new("RGB", (w // 50, h // 50))
    small.putdata([(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)) for _ in range(small.width * small.height)])
    img = small.resize((w, h), Image.BICUBIC)
    noise = Image.effect_noise((w, h), 24).convert("RGB")
    img = Image.blend(img, noise, 0.15)
    return img.convert(mode)


def png16(path: Path, w: int, h: int, alpha: bool) -> None:
    channels = 4 if alpha else 3
    rows = []
    for y in range(h):
        row = bytearray([0])
        for x in range(w):
            px = [x * 65535 // w, y * 65535 // h, 40000] + ([(x + y) * 65535 // (w + h)] if alpha else [])
            for v in px:
                row += struct.pack(">H", v)
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 16, 6 if alpha else 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))


def make_sets(root: Path) -> dict[str, list[Path]]:
    sets: dict[str, list[Path]] = {"jpeg": [], "png": [], "mixed": []}
    (root / "jpeg").mkdir()
    (root / "png").mkdir()
    (root / "mixed").mkdir()
    for i in range(20):
        p = root / "jpeg" / f"{i:02}.jpg"
        photo(3000, 2000, i).save(p, quality=90)
        sets["jpeg"].append(p)
        q = root / "png" / f"{i:02}.png"
        img = photo(1600, 1200, 100 + i, "RGBA")
        alpha = Image.linear_gradient("L").resize((1600, 1200))
        img.putalpha(alpha)
        img.save(q)
        sets["png"].append(q)
    base = photo(600, 400, 999)
    for o in range(0, 10):
        p = root / "mixed" / f"orient{o}.jpg"
        exif = Image.Exif()
        exif[0x0112] = o
        base.save(p, quality=85, exif=exif.tobytes())
        sets["mixed"].append(p)
    cmyk = root / "mixed" / "cmyk.jpg"
    base.convert("CMYK").save(cmyk, quality=85)
    gray = root / "mixed" / "gray.jpg"
    base.convert("L").save(gray, quality=85)
    rgb16 = root / "mixed" / "rgb16.png"
    png16(rgb16, 120, 80, False)
    rgba16 = root / "mixed" / "rgba16.png"
    png16(rgba16, 120, 80, True)
    gif = root / "mixed" / "palette.gif"
    pal = base.convert("P", palette=Image.ADAPTIVE, colors=64)
    pal.info["transparency"] = 0
    pal.save(gif, transparency=0)
    webp = root / "mixed" / "photo.webp"
    base.save(webp, quality=80)
    sets["mixed"] += [cmyk, gray, rgb16, rgba16, gif, webp]
    return sets


def run(cmd: list[str], env: dict) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", MEASURE, *cmd], env=env, capture_output=True, text=True)
    code, rss, took = out.stdout.split()
    if code != "0":
        raise SystemExit(f"{cmd[0]} failed: {out.stderr}")
    return float(took), int(rss)


def lmcp_json(binary: str, env: dict, *args: str) -> dict:
    out = subprocess.run([binary, *args, "--json"], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"lmcp {' '.join(args)} failed: {out.stdout} {out.stderr}")
    return json.loads(out.stdout)["result"] if args[0] == "call" else json.loads(out.stdout)


def prepared_workspace(binary: str, env: dict, name: str, files: list[str], root: Path) -> Path:
    """Imports the files into a new workspace (not timed); returns the build's argument file."""
    ws = lmcp_json(binary, env, "call", "workspace_create", json.dumps({"name": name}))["workspace_id"]
    ids = [lmcp_json(binary, env, "call", "asset_import", json.dumps({"workspace_id": ws, "path": f}), "--yes")["asset_id"] for f in files]
    args = root / f"{name}-build.json"
    args.write_text(json.dumps({"workspace_id": ws, "source_asset_ids": ids, "title": name, "preset": "portrait"}))
    return args


def report(label: str, ours: list, theirs: list, s_ours: int, s_theirs: int) -> None:
    t_ours = statistics.median(t for t, _ in ours)
    t_theirs = statistics.median(t for t, _ in theirs)
    m_ours = max(m for _, m in ours)
    m_theirs = max(m for _, m in theirs)
    print(f"{label}: lmcp {t_ours:.3f} s, {m_ours / 1024:.0f} MiB, {s_ours / 1e6:.2f} MB | img2pdf {t_theirs:.3f} s, {m_theirs / 1024:.0f} MiB, {s_theirs / 1e6:.2f} MB"
          f" | speed {t_theirs / t_ours:.1f}x, size {s_ours / s_theirs:.4f}x, memory {m_ours / m_theirs:.2f}x")


def main(binary: str, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # lmcp's home beside the files, not under them: a root holding lmcp's own data needs --yes
        root = Path(tmp) / "work"
        root.mkdir()
        sets = make_sets(root)
        env = dict(os.environ, LMCP_HOME=str(Path(tmp) / "home"))
        subprocess.run([binary, "roots", "add", str(root)], env=env, check=True, capture_output=True)
        for name in ["jpeg", "png"]:
            files = [str(p) for p in sets[name]]
            build_args = prepared_workspace(binary, env, name, files, root)
            pdf_out, theirs_out = root / f"{name}-ours", root / f"{name}-img2pdf.pdf"
            built, whole, theirs = [], [], []
            for _ in range(runs):
                shutil.rmtree(pdf_out, ignore_errors=True)
                theirs.append(run(["img2pdf", "--pagesize", "A4", "--border", "10mm:10mm", "--fit", "into", "-o", str(theirs_out), *files], env))
                built.append(run([binary, "call", "build_image_pdf", f"@{build_args}", "--yes", "--json"], env))
                whole.append(run([binary, "pdf", *files, "--title", name, "--preset", "portrait", "-o", str(pdf_out)], env))
            build_pdf = lmcp_json(binary, env, "call", "build_image_pdf", f"@{build_args}", "--yes")["file_path"]
            s_theirs = theirs_out.stat().st_size
            report(f"{name} build", built, theirs, Path(build_pdf).stat().st_size, s_theirs)
            report(f"{name} pdf  ", whole, theirs, (pdf_out / "document.pdf").stat().st_size, s_theirs)
        mixed = [str(p) for p in sets["mixed"]]
        took, _ = run([binary, "pdf", *mixed, "--title", "mixed", "--preset", "square", "-o", str(root / "mixed-ours")], env)
        print(f"mixed: lmcp accepted all {len(mixed)} files in {took:.2f} s (upright pages: tests/all/pdf.rs renders every orientation)")
        refused = []
        for f in mixed:
            r = subprocess.run(["img2pdf", "-o", str(root / "one.pdf"), f], capture_output=True)
            if r.returncode != 0:
                refused.append(Path(f).name)
        print(f"mixed: img2pdf refused {len(refused)}: {', '.join(refused) or 'none'}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
