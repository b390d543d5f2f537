"""A STAND-IN for BookKeeper's `bin/bookkeeper shell` (fast tests only; the real shell is used by
tests/integration/test_collect_real_broker.py). Real bookies cannot run in the fast suite, so this
prints what `BookieShell -entryformat hex readledger -m -l ID` prints (a logged header per entry,
then commons-io HexDump rows) for the entries of a JSONL dump (STANDIN_DUMP, e.g. `engine dump`).

Knobs (environment): STANDIN_FAIL=ID (that ledger fails as a missing ledger does), STANDIN_SLEEP=S
(seconds per ledger), STANDIN_CALLS=FILE (appends each ledger id read), STANDIN_NO_HEADERS=1 (INFO
logging off: rows only). It refuses to run without $BOOKIE_CONF naming metadataServiceUri.
"""

import base64
import json
import os
import sys
import time


def rows(data: bytes):
    for start in range(0, max(len(data), 1), 16):
        chunk = data[start : start + 16]
        cells = "".join(f"{b:02X} " for b in chunk) + "   " * (16 - len(chunk))
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        yield f"{start:08X} {cells}{text}"


def main(argv):
    if argv[:1] != ["shell"] or "readledger" not in argv or "-l" not in argv:
        print(f"stand-in: unexpected arguments {argv}", file=sys.stderr)
        return 2
    conf = os.environ.get("BOOKIE_CONF", "")
    if not conf or "metadataServiceUri=" not in open(conf).read():
        print("stand-in: BOOKIE_CONF names no metadataServiceUri", file=sys.stderr)
        return 2
    ledger = int(argv[argv.index("-l") + 1])
    if os.environ.get("STANDIN_CALLS"):
        with open(os.environ["STANDIN_CALLS"], "a") as out:
            out.write(f"{ledger}\n")
    time.sleep(float(os.environ.get("STANDIN_SLEEP", "0")))
    if str(ledger) == os.environ.get("STANDIN_FAIL"):
        print(f"ERROR Error reading entry from ledger {ledger}: No such ledger exists on Metadata Server")
        return 1
    cumulative = 0
    with open(os.environ["STANDIN_DUMP"]) as dump:
        for line in dump:
            obj = json.loads(line)
            if obj["ledgerId"] != ledger:
                continue
            data = base64.b64decode(obj["data"])
            cumulative += len(data)
            if not os.environ.get("STANDIN_NO_HEADERS"):
                print(
                    f"12:00:00.000 [main] INFO  org.apache.bookkeeper.tools.cli.commands.bookie.ReadLedgerCommand - "
                    f"--------- Lid={ledger}, Eid={obj['entryId']}, EntrySize={cumulative} ---------"
                )
            print("\n".join(rows(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
