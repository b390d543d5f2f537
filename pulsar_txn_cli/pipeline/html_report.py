"""The analysis as one self-contained HTML page: inline CSS and SVG, no scripts, no external assets."""
from __future__ import annotations

from html import escape

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}h2{margin-top:2em}.charts{display:flex;flex-wrap:wrap;gap:2em}
figure{margin:0}figcaption{font-weight:600;margin-bottom:.3em}.err{color:#a00}
"""
MAX_ML_SECTIONS = 50  # per-ledger detail for the largest managed ledgers only, to keep the page light


def render(report: dict) -> str:
    totals = report["totals"]
    managed = report["managedLedgers"]
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>pulsar-txn analyze</title>",
        f"<style>{_CSS}</style></head><body><h1>Transaction-log ledger analysis</h1>",
        _summary_table(managed, totals),
        "<h2>All managed ledgers</h2><div class=charts>",
        _chart(totals["recordsPerEntry"], "Records per entry"),
        _chart(totals["entrySizeBytes"], "Entry size (bytes)"),
        _chart({"buckets": [{"le": k, "count": v} for k, v in totals["ops"].items()]}, "Records per operation", label="op"),
        "</div>",
    ]
    biggest = {id(m) for m in sorted(managed, key=lambda m: -m["entries"])[:MAX_ML_SECTIONS]}
    for m in managed:
        if id(m) in biggest:
            parts.append(_section(m))
    if len(managed) > MAX_ML_SECTIONS:
        parts.append(f"<p>Per-ledger detail shown for the {MAX_ML_SECTIONS} largest of {len(managed)} managed ledgers; "
                     "the JSON output (-o json) has all of them.</p>")
    parts.append("</body></html>\n")
    return "".join(parts)


def _summary_table(managed, totals) -> str:
    cols = [("name", "managed ledger"), ("log", "log"), ("entries", "entries"), ("batchedEntries", "batched"),
            ("unbatchedEntries", "unbatched"), ("records", "records"), ("entriesSaved", "entries saved"),
            ("bytes", "bytes"), ("transactions", "transactions"), ("lastBatchedLedgerId", "last batched ledger"),
            ("decodeErrors", "decode errors")]
    rows = managed + [{**totals, "name": "total", "log": ""}]
    return _table(cols, rows)


def _section(m) -> str:
    title = escape(str(m["name"]))
    parts = [f"<h2>{title}</h2><div class=charts>", _chart(m["recordsPerEntry"], "Records per entry"),
             _chart(m["entrySizeBytes"], "Entry size (bytes)"), "</div>",
             _table([("ledgerId", "ledger"), ("entries", "entries"), ("batchedEntries", "batched"),
                     ("unbatchedEntries", "unbatched"), ("records", "records"), ("bytes", "bytes"),
                     ("entriesSaved", "entries saved"), ("decodeErrors", "decode errors")], m["ledgers"])]
    if m["decodeErrorSamples"]:
        items = "".join(f"<li><code>{escape(str(s['position']))}</code>: {escape(str(s['error']))}</li>" for s in m["decodeErrorSamples"])
        parts.append(f"<p class=err>{m['decodeErrors']} entries could not be decoded, e.g.:</p><ul class=err>{items}</ul>")
    return "".join(parts)


def _table(cols, rows) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for _, h in cols)
    body = "".join("<tr>" + "".join(f"<td>{escape(_fmt(r.get(k)))}</td>" for k, _ in cols) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(value) -> str:
    if value is None:
        return "–"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _chart(histogram, caption, label="le") -> str:
    """A horizontal bar chart in inline SVG."""
    buckets = histogram["buckets"]
    peak = max((b["count"] for b in buckets), default=0) or 1
    row, width, text_w = 22, 260, 80
    height = row * len(buckets) + 4
    bars = []
    for i, b in enumerate(buckets):
        y = i * row + 2
        name = f"≤ {b['le']:,}" if label == "le" and isinstance(b["le"], int) else str(b["le"])
        w = round(b["count"] * width / peak)
        bars.append(
            f'<text x="{text_w - 6}" y="{y + 15}" text-anchor="end">{escape(name)}</text>'
            f'<rect x="{text_w}" y="{y + 3}" width="{w}" height="{row - 6}" fill="#3b7dd8"><title>{b["count"]:,}</title></rect>'
            f'<text x="{text_w + w + 4}" y="{y + 15}">{b["count"]:,}</text>'
        )
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{text_w + width + 90}" height="{height}" '
           f'font-size="12" role="img" aria-label="{escape(caption)}">{"".join(bars)}</svg>')
    return f"<figure><figcaption>{escape(caption)}</figcaption>{svg}</figure>"
