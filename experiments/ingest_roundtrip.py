"""How many clause sections ``python -m ablate.ingest`` gets back from real files: the demo corpora's documents (English
and Chinese) written as Markdown, HTML, Word and PDF (PDF lines wrapped as a word processor wraps them), ingested
through the real entry point, and every numbered section (``4.2-a``, ...) compared with the original by id and text.

    python experiments/ingest_roundtrip.py [--out DIR]

Prints one row per corpus and format: numbered sections in the original, found with the same id, of those with the
same text (white space normalised; and ignoring white space, since a Chinese PDF line wrapped at a space beside a
number joins without it), and the seconds ingest took. Figures: experiments/README.md ("Ingest round trip").
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FORMATS = ("md", "html", "docx", "pdf")


def numbered(doc: dict) -> list[dict]:
    return [s for s in doc.get("sections", []) if re.match(r"^\d", s["id"])]


def head(s: dict) -> str:
    return f"{s['id']} {s.get('title') or ''}".strip()


def write_md(doc: dict, path: Path) -> None:
    parts = [f"# {doc['title']}\n"]
    for s in doc.get("sections", []):
        parts.append(
            f"{head(s)}\n{s['text']}\n"
            if re.match(r"^\d", s["id"])
            else f"## {s.get('title') or s['id']}\n\n{s['text']}\n"
        )
    path.write_text("\n".join(parts), encoding="utf-8")


def write_html(doc: dict, path: Path) -> None:
    import html

    body = "".join(
        f"<h2>{html.escape(head(s))}</h2><p>{html.escape(s['text'])}</p>" for s in doc.get("sections", [])
    )
    path.write_text(
        f"<html><head><meta charset='utf-8'><title>{html.escape(doc['title'])}</title></head><body>{body}</body></html>",
        "utf-8",
    )


def write_docx(doc: dict, path: Path) -> None:
    import docx

    d = docx.Document()
    d.add_heading(doc["title"], 0)
    for s in doc.get("sections", []):
        d.add_heading(head(s), 2)
        d.add_paragraph(s["text"])
    d.save(str(path))


def wrap(text: str, zh: bool) -> list[str]:
    if zh:
        return [text[i : i + 38] for i in range(0, len(text), 38)]
    return textwrap.wrap(text, 90)


def write_pdf(doc: dict, path: Path, zh: bool) -> None:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    lines = [doc["title"]]
    for s in doc.get("sections", []):
        lines += [head(s), *wrap(s["text"], zh)]
    c = canvas.Canvas(str(path))
    for page in range(0, len(lines), 34):
        c.setFont("STSong-Light", 10)
        for i, line in enumerate(lines[page : page + 34]):
            c.drawString(40, 800 - 22 * i, line)
        c.drawString(290, 30, str(page // 34 + 1))  # a page number
        c.showPage()
    c.save()


def same(a: str, b: str, zh: bool) -> tuple[bool, bool]:
    norm = " ".join(a.split()) == " ".join(b.split())
    return norm, norm or (zh and re.sub(r"\s", "", a) == re.sub(r"\s", "", b))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    args = ap.parse_args()
    work = Path(args.out or tempfile.mkdtemp(prefix="ingest-roundtrip-"))
    print(
        "| corpus | format | numbered sections | same id | same text | same text ignoring spaces | ingest s |"
    )
    print("|---|---|---|---|---|---|---|")
    for corpus in ("demo", "demo_zh"):
        docs = [
            json.loads(x)
            for x in (REPO / "corpora" / corpus / "corpus.jsonl").read_text("utf-8").splitlines()
        ]
        zh = corpus.endswith("zh")
        for fmt in FORMATS:
            folder = work / corpus / fmt / "docs"
            folder.mkdir(parents=True, exist_ok=True)
            for d in docs:
                target = folder / f"{d['_id']}.{fmt}"
                if fmt == "pdf":
                    write_pdf(d, target, zh)
                else:
                    {"md": write_md, "html": write_html, "docx": write_docx}[fmt](d, target)
            out = work / corpus / fmt / "corpus"
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "ablate.ingest", str(folder), "--out", str(out), "--quiet", "--force"],
                               capture_output=True, text=True)  # fmt: skip
            took = time.perf_counter() - t0
            if p.returncode != 0:
                print(p.stderr, file=sys.stderr)
                return 1
            got = {
                r["_id"]: {s["id"]: s["text"] for s in r.get("sections", [])}
                for r in map(json.loads, (out / "corpus.jsonl").read_text("utf-8").splitlines())
            }
            total = found = exact = loose = 0
            for d in docs:
                for s in numbered(d):
                    total += 1
                    text = got.get(d["_id"], {}).get(s["id"])
                    if text is None:
                        continue
                    found += 1
                    a, b = same(s["text"], text, zh)
                    exact += a
                    loose += b
            print(f"| {corpus} | {fmt} | {total} | {found} | {exact} | {loose} | {took:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
