/// Byte arrays made without a runtime type lookup.
///
/// `[UInt8](unsafeUninitializedCapacity:initializingWith:)` and `[UInt8](repeating:count:)`
/// allocate through a standard-library function that is kept out of line and generic, so every
/// call asks the Swift runtime for `_ContiguousArrayStorage<UInt8>`'s metadata: a hash-table
/// lookup in the runtime's tables, about 300 instructions, and cache misses when the relay woke
/// from idle (a sign-in made about a hundred such arrays). Copying a temporary buffer on the stack
/// into an array takes the specialised path: one cached type reference.
extension Array where Element == UInt8 {
    /// Up to `capacity` bytes written by `body`, which sets how many it wrote (as with
    /// `init(unsafeUninitializedCapacity:initializingWith:)`).
    @inlinable
    public init(uninitializedBytes capacity: Int, initializingWith body: (UnsafeMutableBufferPointer<UInt8>, inout Int) -> Void) {
        precondition(capacity >= 0, "negative byte count")
        // Up to 1 KB the temporary buffer is on the stack. A larger one would be a second heap
        // allocation, dearer than the look-up it saves (and a larger array's work dwarfs both).
        guard capacity <= Self.stackBytes else {
            self.init(unsafeUninitializedCapacity: capacity) { buffer, count in body(buffer, &count) }
            return
        }
        self = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer in
            var written = 0
            body(buffer, &written)
            precondition(written >= 0 && written <= capacity, "more bytes written than allocated")
            return [UInt8](UnsafeBufferPointer(rebasing: buffer[..<written]))
        }
    }

    /// The largest temporary buffer Swift places on the stack without checking the stack's room.
    @usableFromInline static var stackBytes: Int { 1024 }

    /// `count` zero bytes.
    @inlinable
    public init(zeroedBytes count: Int) {
        self.init(uninitializedBytes: count) { buffer, written in
            buffer.initialize(repeating: 0)
            written = count
        }
    }
}
