# bash completion for pulsar-txn; printed by `pulsar-txn completion bash` (scripts/gen_completions.py writes completions/), do not edit.
# Install: source it from ~/.bashrc, or copy it to /etc/bash_completion.d/pulsar-txn.
_pulsar_txn_completion() {
    local IFS=$'
'
    COMPREPLY=( $( env COMP_WORDS="${COMP_WORDS[*]}" \
                   COMP_CWORD=$COMP_CWORD \
                   _PULSAR_TXN_COMPLETE=complete_bash $1 ) )
    return 0
}

complete -o default -F _pulsar_txn_completion pulsar-txn
