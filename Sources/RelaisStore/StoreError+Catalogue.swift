extension StoreError {
    /// Every code with what it means and the state the store is left in, for docs/errors.md
    /// (`relais errors --markdown` generates it from this list).
    public static let catalogue: [(code: String, meaning: String, stateAfter: String)] = [
        (
            "store_unavailable",
            "Redis unreachable (refused, connect timeout), TLS failed (`TLS with host:port: certificate verification failed: …`, `handshake failed`, `handshake timed out`, `cannot load the CA bundle`; `(TLS session ended: …)` after the message when the TLS side ended first), Sentinel gave no master (`no sentinel named a master: …`, with each sentinel's reason) or named one that is not a master yet, Redis answered as a read-only replica twice in a row (failover in progress), refused a write for lack of replicas (`NOREPLICAS`: fewer connected than its `min-replicas-to-write`, e.g. a promoted replica before its own replica is back), is a replica that lost its master (`MASTERDOWN`) or is loading its data after a restart (`LOADING`), Redis Cluster down or without a master for the key's slot (`Redis Cluster is down (CLUSTERDOWN …)`, `no Redis Cluster master serves slot …`, `no Redis Cluster node gave its slot map: …`, `kept redirecting slot …`), a server's circuit open after 3 failures in a row (`circuit open: host:port failed 3 calls in a row`), no reply within the command timeout, connection lost, or authentication/database selection failed. The message names the step.",
            "Unchanged as far as Relais knows. A connection closed by a restarted Redis before any reply to a call is retried once on a fresh connection (the command never reached the new server), and so is a call refused with `READONLY` by a demoted master (a replica executes no write); on a cluster, `MOVED` and `ASK` are followed (up to 5 redirections) and the slot map is refreshed after a failure; any other failure is not retried."
        ),
        ("store_wrong_type", "A key holds another kind of value (a set read as a value or the reverse). Indicates a key-naming bug.", "Unchanged."),
        ("store_command_failed", "Redis answered with an unexpected error or reply shape.", "Unchanged for single commands."),
        ("store_shutdown", "The store was shut down (process exiting).", "—"),
    ]
}
