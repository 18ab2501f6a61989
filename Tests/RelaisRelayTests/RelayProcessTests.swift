import Testing

/// The relay's suites. The relay and the development provider run in this test process (a few
/// tests start the real binary, for its log and its /metrics). One test at a time: the other
/// targets' suites run beside this chain, and tests of real Redis TTLs there must not starve.
@Suite(.serialized) enum RelayProcessTests {}
