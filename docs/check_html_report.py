#!/usr/bin/env python3
"""Check an HTML report of rag_eval in a real browser (headless Chromium).

    python3 docs/check_html_report.py [REPORT.html] [--expect TEXT] [--screenshot OUT.png]
    python3 docs/check_html_report.py --self-test

Without REPORT.html it renders the bundled example's report first
(``rag_eval.py qrels.json run.json --baseline --format html``, whose gate fails:
exit 1 is expected).  The check fails (exit 1) when Chromium logs a console
message for the page, when the rendered DOM lacks TEXT (default: the bundled
example's verdict), or when the screenshot is blank (one colour, or almost no
pixel off the background).  ``--screenshot OUT.png`` also writes the screenshot,
cropped to the page's content: ``--screenshot docs/report.png`` regenerates the
picture in the README.  ``--self-test`` shows that the checks can fail: a blank
page and a page with a script error must both be refused.

Standard library only; the PNG is decoded here with zlib (8-bit RGB or RGBA,
not interlaced: what Chromium writes).  .ci/run calls this script.
"""

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLE_VERDICT = "gate vs baseline.json (max drop 0.02): FAILED"
WIDTH, HEIGHT = 1000, 2400      # the browser window; the screenshot is cropped to content
MARGIN = 24                     # pixels kept below the content when cropping


class CheckFailed(Exception):
    pass


# --- PNG, read and written with zlib ------------------------------------------------

def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _unfilter(kind, line, previous, bpp):
    """One scanline of raw bytes from its filtered form (PNG spec, section 9)."""
    out = bytearray(line)
    if kind == 0:
        return out
    for i in range(len(out)):
        left = out[i - bpp] if i >= bpp else 0
        up = previous[i]
        if kind == 1:
            out[i] = (out[i] + left) & 0xFF
        elif kind == 2:
            out[i] = (out[i] + up) & 0xFF
        elif kind == 3:
            out[i] = (out[i] + ((left + up) >> 1)) & 0xFF
        elif kind == 4:
            out[i] = (out[i] + _paeth(left, up, previous[i - bpp] if i >= bpp else 0)) & 0xFF
        else:
            raise CheckFailed("PNG: unknown filter type %d" % kind)
    return out


def read_png(path):
    """(width, height, channels, rows): rows[y] is the bytes of line y."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise CheckFailed("%s: not a PNG file" % path)
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    channels = {2: 3, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace:
        raise CheckFailed("%s: only 8-bit RGB or RGBA, not interlaced, is read here "
                          "(depth %d, colour type %d, interlace %d)"
                          % (path, depth, colour, interlace))
    raw, stride = zlib.decompress(b"".join(idat)), width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        previous = _unfilter(raw[start], raw[start + 1:start + 1 + stride], previous, channels)
        rows.append(bytes(previous))
    return width, height, channels, rows


def write_png(path, width, channels, rows):
    """An 8-bit RGB or RGBA PNG of ``rows``, each line filtered "up" (small for pages)."""
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
    lines, previous = [], bytes(width * channels)
    for row in rows:
        lines.append(b"\x02" + bytes((a - b) & 0xFF for a, b in zip(row, previous)))
        previous = row
    header = struct.pack(">IIBBBBB", width, len(rows), 8, {3: 2, 4: 6}[channels], 0, 0, 0)
    with open(path, "wb") as handle:
        handle.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                     + chunk(b"IDAT", zlib.compress(b"".join(lines), 9)) + chunk(b"IEND", b""))


def pixels(row, channels):
    return [row[i:i + 3] for i in range(0, len(row), channels)]


def blank_reason(width, height, channels, rows):
    """Why the screenshot is blank, or None: the background is the top-left
    pixel; a page shows something when at least 0.2% of its pixels differ."""
    background = rows[0][:3]
    colours, off = set(), 0
    for row in rows:
        for pixel in pixels(row, channels):
            if pixel != background:
                off += 1
                if len(colours) < 2:
                    colours.add(pixel)
    if not colours:
        return "every pixel is one colour %r" % (tuple(background),)
    if off < 0.002 * width * height:
        return "only %d of %d pixels differ from the background" % (off, width * height)
    return None


def content_height(channels, rows):
    """The last line with a pixel off the background, plus MARGIN."""
    background = rows[0][:3]
    for y in range(len(rows) - 1, -1, -1):
        if any(p != background for p in pixels(rows[y], channels)):
            return min(len(rows), y + 1 + MARGIN)
    return len(rows)


# --- Chromium -------------------------------------------------------------------------

def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    raise CheckFailed("no Chromium here (Debian: apt-get install -y chromium)")


def browse(page, *flags):
    """Run headless Chromium on ``page`` with ``flags``: (stdout, stderr)."""
    profile = tempfile.mkdtemp(prefix="rag_eval-chromium-")
    try:
        done = subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--force-device-scale-factor=1", "--user-data-dir=" + profile,
             "--enable-logging=stderr", "--v=0", "--window-size=%d,%d" % (WIDTH, HEIGHT)]
            + list(flags) + ["file://" + os.path.abspath(page)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return (done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))


def console_messages(log):
    """The page's console messages in Chromium's log (its INFO:CONSOLE lines)."""
    return [line for line in log.splitlines() if ":CONSOLE" in line]


def check(page, expect, screenshot=None):
    """Every check on one page; raises CheckFailed naming the first that fails."""
    dom, log = browse(page, "--dump-dom")
    errors = console_messages(log)
    if errors:
        raise CheckFailed("%s: console messages:\n  %s" % (page, "\n  ".join(errors)))
    if expect not in dom:
        raise CheckFailed("%s: the rendered page lacks %r" % (page, expect))
    with tempfile.TemporaryDirectory() as folder:
        png = os.path.join(folder, "page.png")
        _, log = browse(page, "--screenshot=" + png)
        if not os.path.exists(png):
            raise CheckFailed("%s: Chromium wrote no screenshot:\n%s" % (page, log[-2000:]))
        width, height, channels, rows = read_png(png)
    reason = blank_reason(width, height, channels, rows)
    if reason:
        raise CheckFailed("%s renders blank: %s" % (page, reason))
    if screenshot:
        rows = rows[:content_height(channels, rows)]
        write_png(screenshot, width, channels, rows)
        print("wrote %s (%dx%d)" % (screenshot, width, len(rows)))


def render_example(path):
    """The bundled example's HTML report; its gate fails, so exit 1 is expected."""
    done = subprocess.run([sys.executable, os.path.join(ROOT, "rag_eval.py"), "qrels.json",
                           "run.json", "--baseline", "--format", "html", "-o", path],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if done.returncode != 1:
        raise CheckFailed("the bundled example exited %d, expected 1:\n%s"
                          % (done.returncode, done.stderr.decode("utf-8", "replace")))


def self_test():
    """The checks refuse a blank page and a page with a script error."""
    with tempfile.TemporaryDirectory() as folder:
        cases = {"blank.html": ("<!DOCTYPE html><html><body></body></html>", "renders blank"),
                 "script.html": ("<!DOCTYPE html><html><body><h1>x</h1><script>undefinedFn()"
                                 "</script></body></html>", "console messages")}
        for name, (text, why) in sorted(cases.items()):
            page = os.path.join(folder, name)
            with open(page, "w") as handle:
                handle.write(text)
            try:
                check(page, "")
            except CheckFailed as exc:
                if why not in str(exc):
                    raise CheckFailed("self-test: %s failed for another reason: %s"
                                      % (name, exc)) from None
                print("self-test: %s refused (%s)" % (name, why))
            else:
                raise CheckFailed("self-test: %s passed the check" % name)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", nargs="?", help="the HTML report (default: render the "
                        "bundled example's)")
    parser.add_argument("--expect", default=None, help="text the rendered page must hold "
                        "(default: the bundled example's verdict)")
    parser.add_argument("--screenshot", default=None, metavar="OUT.png")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args(argv)
    try:
        if args.self_test:
            self_test()
            return 0
        with tempfile.TemporaryDirectory() as folder:
            page = args.report
            if page is None:
                page = os.path.join(folder, "report.html")
                render_example(page)
            check(page, EXAMPLE_VERDICT if args.expect is None else args.expect,
                  args.screenshot)
        print("%s: no console message, not blank, holds %r"
              % (args.report or "the bundled example's report",
                 EXAMPLE_VERDICT if args.expect is None else args.expect))
        return 0
    except (CheckFailed, OSError, subprocess.SubprocessError) as exc:
        print("check_html_report: %s" % exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
