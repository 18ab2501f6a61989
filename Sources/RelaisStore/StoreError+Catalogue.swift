extension StoreError {
    /// Every code with what it means and the state the store is left in, for docs/errors.md
    /// (`relais errors --markdown` generates it from this list).
    public static let catalogue: [(code: String, meaning: String, stateAfter: String)] = [
        ("store_unavailable", "Redis unreachable (refused, connect timeout), TLS failed (`TLS with host:port: certificate verification failed: …`, `handshake failed`, `handshake timed out`, `cannot load the CA bundle`; `(TLS session ended: …)` after the message when the TLS side ended first), Sentinel gave no master (`no sentinel named a master: …`, with each sentinel's reason) or named one that is not a master yet, Redis answered as a read-only replica twice in a row (failover in progress), no reply within the command timeout, connection lost, or authentication/database selection failed. The message names the step.", "Unchanged as far as Relais knows. A pooled connection closed by a restarted Redis is retried once on a fresh connection (the command never reached the new server), and so is a batch refused with `READONLY` by a demoted master (a replica executes no write); any other failure is not retried."),
        ("store_wrong_type", "A key holds another kind of value (a set read as a value or the reverse). Indicates a key-naming bug.", "Unchanged."),
        ("store_command_failed", "Redis answered with an unexpected error or reply shape.", "Unchanged for single commands."),
        ("store_shutdown", "The store was shut down (process exiting).", "—"),
    ]
}
