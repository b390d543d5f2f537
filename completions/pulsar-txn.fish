# fish completion for pulsar-txn; printed by `pulsar-txn completion fish` (scripts/gen_completions.py writes completions/), do not edit.
# Install: copy it to ~/.config/fish/completions/pulsar-txn.fish.
complete --command pulsar-txn --no-files --arguments "(env _PULSAR_TXN_COMPLETE=complete_fish _TYPER_COMPLETE_FISH_ACTION=get-args _TYPER_COMPLETE_ARGS=(commandline -cp) pulsar-txn)" --condition "env _PULSAR_TXN_COMPLETE=complete_fish _TYPER_COMPLETE_FISH_ACTION=is-args _TYPER_COMPLETE_ARGS=(commandline -cp) pulsar-txn"
complete --command pulsar-txn --force-files --condition "__fish_seen_subcommand_from decode analyze collect"
