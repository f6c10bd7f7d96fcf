"""Images to PDF: `lmcp pdf` against img2pdf on the same files, in one run.

Sets (generated deterministically with Pillow, seeded):
  jpeg   20 photo-like 3000x2000 JPEGs
  png    20 1600x1200 RGBA PNGs with real transparency (smooth photo, a little noise, alpha ramp)
  noise  10 1600x1200 RGBA PNGs made otherwise: photos with strong per-channel grain and a
         grainy radial alpha (the kind where the filter choice and deflate level decide)
  flat   10 1200x900 RGBA PNGs: flat graphics (shapes, lines, text; anti-aliased edges) on a
         transparent ground, some fills half transparent
  screen 10 1920x1080 RGB PNGs: screenshot-like (window chrome, lists and text, buttons, a
         chart, a photo inset), saved as screenshot tools do, opaque; img2pdf embeds such a
         PNG's compressed data as it is, so this set is the one where it does no work
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

from PIL import Image, ImageDraw, ImageFont

# Runs a command in a fresh Python process (so RUSAGE_CHILDREN's max RSS and CPU time are that
# command's alone) and times the command itself, not this wrapper's start-up. CPU time (user +
# system) is reported beside wall time: on a shared machine whose cores other processes are
# using, wall time follows CPU time, and a program that spreads its work over cores gains
# nothing from it (issue 39's JPEG finding).
MEASURE = "import resource, subprocess, sys, time; t = time.perf_counter(); r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE); t = time.perf_counter() - t; u = resource.getrusage(resource.RUSAGE_CHILDREN); print(r.returncode, u.ru_maxrss, t, u.ru_utime + u.ru_stime); sys.stderr.write(r.stderr.decode()[-500:])"


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


def grain(w: int, h: int, rnd: random.Random) -> Image.Image:
    """Uniform noise, seeded (Pillow's effect_noise follows C's rand())."""
    return Image.frombytes("L", (w, h), rnd.randbytes(w * h))


def noisy(w: int, h: int, seed: int) -> Image.Image:
    rnd = random.Random(seed)
    img = photo(w, h, seed)
    img = Image.blend(img, Image.merge("RGB", [grain(w, h, rnd) for _ in range(3)]), 0.3)
    alpha = Image.radial_gradient("L").resize((w, h))
    img.putalpha(Image.blend(alpha, grain(w, h, rnd), 0.2))
    return img


def flat(w: int, h: int, seed: int) -> Image.Image:
    rnd = random.Random(seed)
    colours = [(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)) for _ in range(6)]
    big = Image.new("RGBA", (2 * w, 2 * h), (0, 0, 0, 0))
    d = ImageDraw.Draw(big)
    for _ in range(25):
        x, y = rnd.randrange(2 * w), rnd.randrange(2 * h)
        sw, sh = rnd.randrange(60, 700), rnd.randrange(60, 700)
        fill = rnd.choice(colours) + (rnd.choice([255, 255, 160]),)
        kind = rnd.randrange(4)
        if kind == 0:
            d.rounded_rectangle([x, y, x + sw, y + sh], radius=rnd.randrange(4, 50), fill=fill)
        elif kind == 1:
            d.ellipse([x, y, x + sw, y + sh], fill=fill)
        elif kind == 2:
            d.polygon([(rnd.randrange(2 * w), rnd.randrange(2 * h)) for _ in range(5)], fill=fill)
        else:
            d.line([(x, y), (x + sw, y + sh)], fill=fill, width=rnd.randrange(4, 30))
    font = ImageFont.load_default(size=64)
    for _ in range(6):
        d.text((rnd.randrange(2 * w - 600), rnd.randrange(2 * h - 80)), "Label %d" % rnd.randrange(1000), font=font, fill=rnd.choice(colours) + (255,))
    return big.resize((w, h), Image.LANCZOS)


def screen(w: int, h: int, seed: int) -> Image.Image:
    rnd = random.Random(seed)
    img = Image.new("RGB", (w, h), (246, 246, 248))
    d = ImageDraw.Draw(img)
    accent = (rnd.randrange(40, 200), rnd.randrange(40, 200), rnd.randrange(120, 255))
    d.rectangle([0, 0, w, 36], fill=(222, 222, 226))
    for i, c in enumerate([(255, 95, 86), (255, 189, 46), (39, 201, 63)]):
        d.ellipse([12 + 22 * i, 11, 26 + 22 * i, 25], fill=c)
    d.rectangle([0, 36, 280, h], fill=(236, 236, 240))
    small, body, title = (ImageFont.load_default(size=s) for s in (13, 15, 24))
    words = "file edit view window help build open save close image page photo report table chart value total".split()
    for i in range(40):
        y = 50 + 24 * i
        if i == 3 + seed % 5:
            d.rectangle([4, y - 3, 276, y + 19], fill=accent)
        d.text((16, y), " ".join(rnd.choice(words) for _ in range(rnd.randrange(1, 4))), font=small, fill=(40, 40, 40))
    d.text((310, 56), " ".join(rnd.choice(words) for _ in range(4)).title(), font=title, fill=(20, 20, 20))
    for i in range(18):
        y = 100 + 22 * i
        line = " ".join(rnd.choice(words) for _ in range(rnd.randrange(6, 16)))
        d.text((310, y), line, font=body, fill=(60, 60, 60))
    for i in range(4):
        d.rounded_rectangle([310 + 130 * i, 520, 430 + 130 * i, 556], radius=6, fill=accent if i == 0 else (255, 255, 255), outline=(200, 200, 200))
        d.text((330 + 130 * i, 530), rnd.choice(words).title(), font=body, fill=(255, 255, 255) if i == 0 else (30, 30, 30))
    d.rectangle([310, 590, 1100, 1000], fill=(255, 255, 255), outline=(210, 210, 210))
    pts = [(330 + 25 * i, 980 - rnd.randrange(20, 360)) for i in range(31)]
    d.line(pts, fill=accent, width=3)
    for x in range(330, 1100, 100):
        d.line([(x, 600), (x, 990)], fill=(235, 235, 235))
    img.paste(photo(600, 400, seed), (1200, 590))
    return img


def make_sets(root: Path) -> dict[str, list[Path]]:
    sets: dict[str, list[Path]] = {name: [] for name in ["jpeg", "png", "noise", "flat", "screen", "mixed"]}
    for name in sets:
        (root / name).mkdir()
    for i in range(10):
        for name, make, size in [("noise", noisy, (1600, 1200)), ("flat", flat, (1200, 900)), ("screen", screen, (1920, 1080))]:
            p = root / name / f"{i:02}.png"
            make(*size, 200 + i).save(p)
            sets[name].append(p)
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


def run(cmd: list[str], env: dict) -> tuple[float, int, float]:
    """Wall time, max RSS (KiB) and CPU time of one run of `cmd`."""
    out = subprocess.run([sys.executable, "-c", MEASURE, *cmd], env=env, capture_output=True, text=True)
    code, rss, took, cpu = out.stdout.split()
    if code != "0":
        raise SystemExit(f"{cmd[0]} failed: {out.stderr}")
    return float(took), int(rss), float(cpu)


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
    t_ours = statistics.median(t for t, _, _ in ours)
    t_theirs = statistics.median(t for t, _, _ in theirs)
    c_ours = statistics.median(c for _, _, c in ours)
    c_theirs = statistics.median(c for _, _, c in theirs)
    m_ours = max(m for _, m, _ in ours)
    m_theirs = max(m for _, m, _ in theirs)
    print(f"{label}: lmcp {t_ours:.3f} s (cpu {c_ours:.3f} s), {m_ours / 1024:.0f} MiB, {s_ours / 1e6:.2f} MB | img2pdf {t_theirs:.3f} s (cpu {c_theirs:.3f} s), {m_theirs / 1024:.0f} MiB, {s_theirs / 1e6:.2f} MB"
          f" | time {t_ours / t_theirs:.3f}x, cpu {c_ours / c_theirs:.3f}x, size {s_ours / s_theirs:.4f}x, memory {m_ours / m_theirs:.2f}x")


def main(binary: str, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # lmcp's home beside the files, not under them: a root holding lmcp's own data needs --yes
        root = Path(tmp) / "work"
        root.mkdir()
        sets = make_sets(root)
        env = dict(os.environ, LMCP_HOME=str(Path(tmp) / "home"))
        subprocess.run([binary, "roots", "add", str(root)], env=env, check=True, capture_output=True)
        for name in ["jpeg", "png", "noise", "flat", "screen"]:
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
        took, _, _ = run([binary, "pdf", *mixed, "--title", "mixed", "--preset", "square", "-o", str(root / "mixed-ours")], env)
        print(f"mixed: lmcp accepted all {len(mixed)} files in {took:.2f} s (upright pages: tests/all/pdf.rs renders every orientation)")
        refused = []
        for f in mixed:
            r = subprocess.run(["img2pdf", "-o", str(root / "one.pdf"), f], capture_output=True)
            if r.returncode != 0:
                refused.append(Path(f).name)
        print(f"mixed: img2pdf refused {len(refused)}: {', '.join(refused) or 'none'}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
