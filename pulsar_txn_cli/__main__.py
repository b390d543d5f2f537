import sys

try:
    from pulsar_txn_cli.cli.main import main
except KeyboardInterrupt:  # Ctrl-C while Python loads the modules: nothing was done
    print("interrupted (Ctrl-C) before the command began: nothing was done", file=sys.stderr)
    sys.exit(130)

main()
