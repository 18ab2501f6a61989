import Testing

/// Every suite of this target starts a development provider and Relais processes. Run one test at a
/// time so they do not starve each other, or the timing-sensitive tests of other targets, of CPU.
@Suite(.serialized) enum RelayProcessTests {}
