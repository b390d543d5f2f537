from pulsar_txn_cli.cli.main import main

main()
