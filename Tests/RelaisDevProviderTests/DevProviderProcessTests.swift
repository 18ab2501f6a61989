import Testing

/// The development provider's suites. The provider runs in this test process (the cross-checks
/// with the independent Python client start the real binary). One test at a time, like the
/// relay's chain, so the suites of other targets running beside it are not starved of CPU.
@Suite(.serialized) enum DevProviderProcessTests {}
