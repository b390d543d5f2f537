import sys

try:
    from pulsar_txn_cli.cli.main import BEFORE_COMMAND, main
except KeyboardInterrupt:  # Ctrl-C while Python loads the modules: nothing was done
    print("interrupted (Ctrl-C) before the command began: nothing was done", file=sys.stderr)
    sys.exit(130)

try:
    main()
except KeyboardInterrupt:  # Ctrl-C as main() is entered, before its first line and its own handler
    print(BEFORE_COMMAND, file=sys.stderr)
    sys.exit(130)
