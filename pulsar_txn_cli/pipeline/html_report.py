"""The analysis as one self-contained HTML page: inline CSS, SVG and one small script (the table
filter), no external assets, readable without a server.

It leads with the answer (what batching saved, which logs still hold batched ledgers: the
downgrade's blockers), then the histograms, then every managed ledger grouped by log, sorted by
what matters (batched entries first) and searchable, then per-ledger detail of the largest.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from html import escape

from pulsar_txn_cli.output.units import spaced_utc

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em 2em;color:#222;max-width:80em}
h1{font-size:1.5em;margin:0 0 .2em}h2{margin:1.6em 0 .4em;font-size:1.2em}
.meta{color:#555;margin:0 0 1em}.meta dt{font-weight:600;float:left;clear:left;width:6em}
.meta dd{margin:0 0 0 6.5em;overflow-wrap:anywhere}
.findings{border:1px solid #ccd;border-radius:6px;padding:.6em 1em;background:#f7f8fc}
.findings li{margin:.3em 0}.ok{color:#165d16}.bad{color:#a00}.warn{color:#8a5a00}
table{border-collapse:collapse;margin:.4em 0 1em}th,td{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:right;vertical-align:top}
th{background:#f3f3f3;position:sticky;top:0}
td{white-space:nowrap}th:first-child,td:first-child,td.name{text-align:left}td.name{white-space:normal;overflow-wrap:anywhere;max-width:40em}
.charts{display:flex;flex-wrap:wrap;gap:1.5em 2.5em}figure{margin:0}figcaption{font-weight:600;margin-bottom:.3em}
input[type=search]{font:inherit;padding:.25em .5em;width:24em;max-width:100%}
details{margin:.4em 0}summary{cursor:pointer;overflow-wrap:anywhere}.err{color:#a00}
.count{color:#555}
"""
# Filters every table row whose data-name holds the query (no server, no library).
_SCRIPT = """
function filterRows(input){var q=input.value.toLowerCase(),shown=0,rows=document.querySelectorAll('tr[data-name]');
rows.forEach(function(r){var hit=r.dataset.name.indexOf(q)>=0;r.hidden=!hit;if(hit)shown++;});
document.getElementById('shown').textContent=shown.toLocaleString('en')+' of '+rows.length.toLocaleString('en')+' managed ledgers shown';}
"""
MAX_ML_SECTIONS = 50  # per-ledger detail for the largest managed ledgers only, to keep the page light
BAR_WIDTH, ROW, CHAR = 240, 20, 8.4  # px; CHAR: a generous width of one character at 12px (capitals measured 7.6)
MIN_BAR = 3  # px: a bucket with 1 entry next to one with 100,000 stays visible


def render(report: dict, context: dict | None = None) -> str:
    """The page; context names what the report is about: inputs (paths), target, engine, generated (ISO time)."""
    totals = report["totals"]
    managed = report["managedLedgers"]
    context = context or {}
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width,initial-scale=1'><title>pulsar-txn analyze</title>",
        f"<style>{_CSS}</style><script>{_SCRIPT}</script></head><body><h1>Transaction-log ledger analysis</h1>",
        _meta(context, report),
        "<h2>Findings</h2>",
        _findings(managed, totals),
        "<h2>Batched ledgers: what blocks a downgrade</h2>",
        _blockers(managed),
        "<h2>Entries and records</h2><div class=charts>",
        _chart(totals["recordsPerEntry"]["buckets"], "Records per entry", _records_label),
        _chart(totals["entrySizeBytes"]["buckets"], "Entry size", _size_label),
        *(_ops_chart(managed, log) for log in ("tc", "pending-ack")),
        "</div>",
        "<h2>Every managed ledger</h2>",
        _fleet(managed),
    ]
    biggest = sorted(managed, key=lambda m: -m["entries"])[:MAX_ML_SECTIONS]
    if biggest:
        parts.append("<h2>Per-ledger detail</h2>")
        if len(managed) > MAX_ML_SECTIONS:
            parts.append(
                f"<p>For the {MAX_ML_SECTIONS} largest of {len(managed):,} managed ledgers; "
                "the JSON output (-o json) has all of them.</p>"
            )
        parts.extend(_section(m) for m in biggest)
    parts.append("</body></html>\n")
    return "".join(parts)


def context_of(paths, *, engine: str, now: datetime | None = None) -> dict:
    """The page's context for `analyze --html`: the inputs, the cluster they were collected from
    (named by a `collect` directory's manifest) and the time."""
    targets = []
    for path in paths:
        manifest = os.path.join(str(path), "_collect", "collect.json")
        try:
            with open(manifest, encoding="utf-8") as f:
                targets.append(json.load(f).get("target") or "")
        except (OSError, ValueError, AttributeError):
            continue
    return {
        "inputs": [str(p) for p in paths],
        "target": ", ".join(t for t in dict.fromkeys(targets) if t)
        or "not recorded (dump files; `collect` records the cluster)",
        "engine": engine,
        "generated": spaced_utc(now),
    }


def _meta(context: dict, report: dict) -> str:
    inputs = context.get("inputs") or report.get("inputs") or []
    shown = ", ".join(str(i) for i in inputs[:10]) + (f" and {len(inputs) - 10:,} more" if len(inputs) > 10 else "")
    rows = [
        ("Inputs", shown or "not recorded"),
        ("Cluster", context.get("target") or "not recorded"),
        ("Analysed", " · ".join(x for x in (context.get("generated"), context.get("engine")) if x) or "not recorded"),
    ]
    return "<dl class=meta>" + "".join(f"<dt>{k}</dt><dd>{escape(str(v))}</dd>" for k, v in rows) + "</dl>"


def _findings(managed, totals) -> str:
    items = []
    for log, label in (("tc", "Transaction-coordinator logs"), ("pending-ack", "Pending-ack logs")):
        group = [m for m in managed if m["log"] == log]
        if not group:
            continue
        entries = sum(m["entries"] - m["decodeErrors"] for m in group)
        records = sum(m["records"] for m in group)
        saved = sum(m["entriesSaved"] for m in group)
        share = f"{saved / records:.0%}" if records else "0%"
        items.append(
            f"<li><b>{label}</b> ({len(group):,}): {records:,} records in {entries:,} entries: batching saved "
            f"<b>{saved:,} entries</b> ({share} fewer writes than one entry per record).</li>"
        )
    holding = [m for m in managed if m["batchedEntries"]]
    if holding:
        items.append(
            f"<li class=bad><b>{len(holding):,} of {len(managed):,} logs still hold batched ledgers</b>: a broker "
            "older than PIP-160 cannot read them, so they block a downgrade until trimmed (table below).</li>"
        )
    elif totals["decodeErrors"]:
        items.append(
            "<li class=warn>No decoded entry is batched, but some entries could not be decoded: "
            "this is not proof that nothing is batched.</li>"
        )
    else:
        items.append(f"<li class=ok>None of the {len(managed):,} logs holds a batched entry in these dumps.</li>")
    if totals["decodeErrors"]:
        items.append(
            f"<li class=bad>{totals['decodeErrors']:,} of {totals['entries']:,} entries could not be decoded "
            "(samples under each managed ledger below).</li>"
        )
    return f"<ul class=findings>{''.join(items)}</ul>"


def _batched_ids(m) -> list[int]:
    return [l["ledgerId"] for l in m["ledgers"] if l["batchedEntries"] and l["ledgerId"] is not None]


def _blockers(managed) -> str:
    holding = [m for m in managed if m["batchedEntries"]]
    if not holding:
        return "<p>No managed ledger holds batched entries.</p>"
    # Longest-standing first: the oldest batched ledger is the one a downgrade waits for longest.
    holding.sort(key=lambda m: (min(_batched_ids(m), default=0), m["name"]))
    cols = [
        ("log", "log"),
        ("batchedLedgers", "batched ledgers"),
        ("since", "since ledger"),
        ("lastBatchedLedgerId", "last batched ledger"),
        ("batchedEntries", "batched entries"),
        ("entries", "entries"),
    ]
    rows = [{**m, "batchedLedgers": len(_batched_ids(m)), "since": min(_batched_ids(m), default=None)} for m in holding]
    return (
        "<p>Ledger ids grow with time, so <i>since ledger</i> is the oldest ledger that holds batched entries.</p>"
        + _table([("name", "managed ledger"), *cols], rows, searchable=False)
    )


def _fleet(managed) -> str:
    if not managed:
        return "<p>No managed ledgers.</p>"
    parts = [
        "<p><input type=search placeholder='filter by name' aria-label='filter managed ledgers by name' "
        f"oninput='filterRows(this)'> <span id=shown class=count>{len(managed):,} managed ledgers</span></p>"
    ]
    cols = [
        ("name", "managed ledger"),
        ("entries", "entries"),
        ("batchedEntries", "batched"),
        ("records", "records"),
        ("entriesSaved", "entries saved"),
        ("bytes", "bytes"),
        ("transactions", "transactions"),
        ("lastBatchedLedgerId", "last batched ledger"),
        ("decodeErrors", "decode errors"),
    ]
    for log, label in (("tc", "Transaction-coordinator logs"), ("pending-ack", "Pending-ack logs"), (None, "Other")):
        group = [m for m in managed if m["log"] == log]
        if group:
            group.sort(key=lambda m: (-m["batchedEntries"], -m["entries"], m["name"]))
            parts.append(f"<h3>{label} ({len(group):,})</h3>" + _table(cols, group, searchable=True))
    return "".join(parts)


def _ops_chart(managed, log) -> str:
    from pulsar_txn_cli.pipeline.facts import OPS_OF_LOG

    counts = {op: sum(m["ops"].get(op, 0) for m in managed if m["log"] == log) for op in OPS_OF_LOG[log]}
    if not any(counts.values()):
        return ""
    title = "Records per operation, coordinator logs" if log == "tc" else "Records per operation, pending-ack logs"
    return _chart([{"le": op, "count": n} for op, n in counts.items()], title, None, trim=False)


def _section(m) -> str:
    title = escape(str(m["name"]))
    parts = [
        f"<details><summary><b>{title}</b> <span class=count>({m['log'] or 'unknown log'}, "
        f"{len(m['ledgers']):,} ledgers, {m['entries']:,} entries)</span></summary><div class=charts>",
        _chart(m["recordsPerEntry"]["buckets"], "Records per entry", _records_label),
        _chart(m["entrySizeBytes"]["buckets"], "Entry size", _size_label),
        "</div>",
        _table(
            [
                ("ledgerId", "ledger"),
                ("entries", "entries"),
                ("batchedEntries", "batched"),
                ("unbatchedEntries", "unbatched"),
                ("records", "records"),
                ("bytes", "bytes"),
                ("entriesSaved", "entries saved"),
                ("decodeErrors", "decode errors"),
            ],
            m["ledgers"],
            searchable=False,
        ),
    ]
    if m["decodeErrorSamples"]:
        items = "".join(
            f"<li><code>{escape(str(s['position']))}</code>: {escape(str(s['error']))}</li>"
            for s in m["decodeErrorSamples"]
        )
        parts.append(
            f"<p class=err>{m['decodeErrors']:,} entries could not be decoded, e.g.:</p><ul class=err>{items}</ul>"
        )
    parts.append("</details>")
    return "".join(parts)


def _table(cols, rows, *, searchable: bool) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for _, h in cols)
    body = []
    for r in rows:
        attr = f" data-name='{escape(str(r.get('name', '')).lower(), quote=True)}'" if searchable else ""
        cells = "".join(f"<td{' class=name' if k == 'name' else ''}>{escape(_fmt(r.get(k)))}</td>" for k, _ in cols)
        body.append(f"<tr{attr}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _fmt(value) -> str:
    if value is None:
        return "–"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _records_label(le, previous) -> str:
    if le == "+Inf":
        return f"> {previous:,}"
    low = previous + 1
    return f"{le:,}" if low >= le else f"{low:,}–{le:,}"


def _size_label(le, previous) -> str:
    return f"> {_bytes(previous)}" if le == "+Inf" else f"≤ {_bytes(le)}"


def _bytes(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def _chart(buckets, caption, label, trim: bool = True) -> str:
    """A horizontal bar chart in inline SVG: only the range of buckets that hold entries (trim),
    labels as wide as the longest (label(le, previous bound) names a bucket; None: le as it is),
    every non-zero bar at least MIN_BAR wide."""
    named, previous = [], 0
    for b in buckets:
        named.append((label(b["le"], previous) if label else str(b["le"]), b["count"]))
        previous = b["le"] if isinstance(b["le"], int) else previous
    if trim:
        used = [i for i, (_, n) in enumerate(named) if n]
        named = named[used[0] : used[-1] + 1] if used else []
    if not named:
        return f"<figure><figcaption>{escape(caption)}</figcaption><p>no decoded entries</p></figure>"
    peak = max(n for _, n in named) or 1
    text_w = round(max(len(name) for name, _ in named) * CHAR) + 10
    count_w = round(max(len(f"{n:,}") for _, n in named) * CHAR) + 10
    bars = []
    for i, (name, count) in enumerate(named):
        y = i * ROW + 2
        w = max(MIN_BAR, round(count * BAR_WIDTH / peak)) if count else 0
        bars.append(
            f'<text x="{text_w - 6}" y="{y + 14}" text-anchor="end">{escape(name)}</text>'
            f'<rect x="{text_w}" y="{y + 3}" width="{w}" height="{ROW - 6}" fill="#3b7dd8"><title>{count:,}</title></rect>'
            f'<text x="{text_w + w + 4}" y="{y + 14}" class=count>{count:,}</text>'
        )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{text_w + BAR_WIDTH + count_w}" height="{ROW * len(named) + 4}" '
        f'font-size="12" font-family="system-ui,sans-serif" role="img" aria-label="{escape(caption)}">{"".join(bars)}</svg>'
    )
    return f"<figure><figcaption>{escape(caption)}</figcaption>{svg}</figure>"
