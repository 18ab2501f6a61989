import Testing

/// The relay's journeys, in two chains of one test at a time: sign-in, tokens, limits and the
/// tests of the real binary (its log and its /metrics) in this one; sessions, providers and back-channel
/// logout in ``RelaySessionsAndProvidersChain``. The relay and the development provider run in
/// this test process. Two chains rather than full parallelism: the other targets' suites run
/// beside them, and their tests of real Redis TTLs and HTTP timeouts must not starve.
@Suite(.serialized) enum RelaySignInAndTokensChain {}

/// The second chain (see ``RelaySignInAndTokensChain``). Back-channel logout's counters are read as gains
/// over a test, which holds because they are only moved by tests of this one chain.
@Suite(.serialized) enum RelaySessionsAndProvidersChain {}
