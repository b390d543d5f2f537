"""The HTML report in a real browser (Debian's headless Chromium): a synthetic fleet of 1,500
managed ledgers is rendered, a screenshot is taken, and a script measured inside the page proves
that no text overflows its box (table cells, headings, chart labels inside their SVG), that every
non-zero bar is visible, that operation labels are whole, and that the filter finds rows.
A missing Chromium is a failure naming the package (`apt-get install chromium`, see ./dev setup)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from pulsar_txn_cli import codec

from .conftest import ack, lifecycle, tc, write_jsonl

WIDTH, HEIGHT = 1280, 2400
# Runs after the page's own script: measures, exercises the filter, writes the results into the DOM.
MEASURE = """<script>window.addEventListener('load', function () {
  var out = {overflow: [], labels: [], bars: [], pageWidth: document.documentElement.scrollWidth};
  document.querySelectorAll('h1,h2,h3,p,li,dd,dt,th,td,figcaption,summary').forEach(function (el) {
    if (el.offsetParent !== null && el.scrollWidth > el.clientWidth + 1)
      out.overflow.push(el.tagName + ': ' + el.textContent.slice(0, 60) + ' (' + el.scrollWidth + ' > ' + el.clientWidth + ')');
  });
  document.querySelectorAll('svg text').forEach(function (t) {
    var box = t.getBBox(), width = t.ownerSVGElement.width.baseVal.value;
    out.labels.push(t.textContent);
    if (box.x < 0 || box.x + box.width > width + 0.5)
      out.overflow.push('svg text: ' + t.textContent + ' (' + box.x.toFixed(1) + '..' + (box.x + box.width).toFixed(1) + ' of ' + width + ')');
  });
  document.querySelectorAll('svg rect').forEach(function (r) {
    out.bars.push([r.querySelector('title').textContent, r.width.baseVal.value]);
  });
  var input = document.querySelector('input[type=search]');
  input.value = 'ORDERS-77';
  input.dispatchEvent(new Event('input'));
  out.filtered = document.querySelectorAll('tr[data-name]:not([hidden])').length;
  out.shown = document.getElementById('shown').textContent;
  var pre = document.createElement('pre'); pre.id = 'measured'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});</script>"""


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail(
            "Chromium is not installed: `./dev setup` installs it (its Chromium and fish step, Debian's package)",
            pytrace=False,
        )
    return path


def fleet_entries():
    """4 TC logs (two still batched), 1,496 pending-ack logs (a few batched), one corrupt entry."""
    entries = []
    for c in range(4):
        ml = f"pulsar/system/persistent/__transaction_log_{c}"
        for ledger in range(3):
            batched = c < 2 and ledger < 2
            for e in range(4):
                records = lifecycle(100 * ledger + 10 * e + c) if batched else [tc(0, 1000 * c + 10 * ledger + e)]
                data = codec.encode_batch(records) if batched else codec.encode_single(records[0])
                entries.append((ml, 100 + 10 * c + ledger, e, data))
    for s in range(1496):
        ml = (
            f"tenant-{s % 7}/namespace-{s % 3}/persistent/orders-{s}-partition-{s % 12}-"
            f"billing-subscription-with-a-long-name__transaction_pending_ack"
        )
        data = codec.encode_batch([ack(s), ack(s + 1), ack(s + 2)]) if s % 250 == 0 else codec.encode_single(ack(s))
        entries.append((ml, 5000 + s, 0, data))
    entries.append(
        (
            "tenant-0/namespace-0/persistent/orders-0-partition-0-billing-subscription-with-a-long-name"
            "__transaction_pending_ack",
            5000,
            1,
            b"\x0e\x01\x00\x01\x0a\xff",
        )
    )
    return entries


@pytest.mark.tools
def test_the_report_reads_well_in_a_real_browser(cli, tmp_path):
    browser = chromium()
    dump = write_jsonl(tmp_path / "fleet.jsonl", fleet_entries())
    report = tmp_path / "report.html"
    result = cli(["analyze", dump, "--engine", "local", "--html", str(report), "-q", "-o", "json"])
    assert result.exit_code == 3, result.stderr  # the corrupt entry
    html = report.read_text()
    assert "Findings" in html.split("<table")[0]  # the answer comes before any table
    assert dump in html and "UTC" in html  # names its inputs and time
    measured = tmp_path / "measured.html"
    measured.write_text(html.replace("</body>", MEASURE + "</body>"))
    base = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={WIDTH},{HEIGHT}",
    ]
    dom = subprocess.run(
        [*base, "--virtual-time-budget=10000", "--dump-dom", measured.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom.stdout, re.S)
    assert found, f"the measuring script did not run: {dom.stderr[-2000:]}"
    out = json.loads(
        found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    )
    assert out["overflow"] == [], out["overflow"][:20]
    assert out["pageWidth"] <= WIDTH, f"the page is {out['pageWidth']} px wide in a {WIDTH} px window"
    for label in ("ADD_PARTITION", "ADD_SUBSCRIPTION", "UPDATE:COMMITTING", "UPDATE:OPEN", "ACK", "COMMIT"):
        assert label in out["labels"]
    assert "1" in out["labels"] and "3–4" in out["labels"]  # fine buckets at the low end
    small = [w for count, w in out["bars"] if count != "0" and int(count.replace(",", "")) <= 10]
    assert small and min(small) >= 3, out["bars"]  # a count of 1 next to thousands is still a visible bar
    assert out["filtered"] == 11 and out["shown"].startswith(
        "11 of 1,500"
    )  # orders-77 and orders-770..779, case-insensitive
    shot = tmp_path / "report.png"
    subprocess.run([*base, f"--screenshot={shot}", report.as_uri()], capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000
    if keep := __import__("os").environ.get("PULSAR_TXN_KEEP_SCREENSHOT"):
        shutil.copy(shot, keep)
