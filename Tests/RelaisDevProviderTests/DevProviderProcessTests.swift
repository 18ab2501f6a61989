import Testing

/// Every suite of this target starts real provider processes (with key generation). Run one test at
/// a time so they do not starve each other, or the timing-sensitive tests of other targets, of CPU
/// on small CI machines.
@Suite(.serialized) enum DevProviderProcessTests {}
