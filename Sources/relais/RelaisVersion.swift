#if canImport(Glibc)
import Glibc
#endif

/// `relais --version`: the release, and the commit the binary was built from.
///
/// SwiftPM has no build-time value (a `-D` define carries none), and a generated Swift file would
/// be committed stale or rebuild every module. So the release is written here, and the commit
/// travels in the ELF build id: `make release`, `make demo` (and anyone else) link with
/// `-Xlinker --build-id=0x524c<40 hex digits of the commit>0000`: "RL", the commit's 20 bytes,
/// then 0x0000, or 0x2d44 ("-D") when the tree differed from that commit ("-dirty"); 24 bytes, so
/// that readelf and debuggers still take it for a build id. The binary reads its own build id at
/// run time (from /proc/self/exe). Changing it relinks the binary, nothing else. A plain
/// `swift build` has the linker's own build id (a 20-byte hash): the commit then reads "unknown".
enum RelaisVersion {
    /// The release this tree prepares; raised when one is tagged.
    static let release = "0.1.0"

    static let marker: [UInt8] = [0x52, 0x4C]

    /// `0.1.0 (commit 1f2e…)`, or `0.1.0 (commit unknown)`.
    static var description: String { "\(release) (commit \(buildID().flatMap(commit(fromBuildID:)) ?? "unknown"))" }

    /// The commit a build id carries, as `make` writes it; nil for any other build id.
    static func commit(fromBuildID id: [UInt8]) -> String? {
        guard id.count == 24, Array(id.prefix(2)) == marker else { return nil }
        let dirty: Bool
        switch (id[22], id[23]) {
        case (0, 0): dirty = false
        case (0x2D, 0x44): dirty = true
        default: return nil
        }
        let hex = id[2..<22].map { byte in
            let digits = Array("0123456789abcdef")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
        }.joined()
        return dirty ? hex + "-dirty" : hex
    }

    /// The executable's GNU build id note, read from its own file (/proc/self/exe: the ELF
    /// header, the program headers, the PT_NOTE segments); nil without one, or off Linux.
    static func buildID() -> [UInt8]? {
        #if canImport(Glibc)
        let descriptor = open("/proc/self/exe", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        func read(_ count: Int, at offset: Int) -> [UInt8]? {
            guard count >= 0, count <= 1 << 20, offset >= 0 else { return nil }
            var bytes = [UInt8](repeating: 0, count: count)
            let got = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, count, off_t(offset)) }
            return got == count ? bytes : nil
        }
        func integer(_ bytes: [UInt8], _ offset: Int, _ size: Int) -> Int {
            (0..<size).reduce(0) { value, index in value | Int(bytes[offset + index]) << (8 * index) }  // little-endian
        }
        // ELF64, little-endian (x86-64 and arm64 Linux).
        guard let header = read(64, at: 0), header.prefix(4) == [0x7F, 0x45, 0x4C, 0x46], header[4] == 2, header[5] == 1 else { return nil }
        let tableOffset = integer(header, 0x20, 8), entrySize = integer(header, 0x36, 2), count = integer(header, 0x38, 2)
        guard entrySize >= 56, let table = read(entrySize * count, at: tableOffset) else { return nil }
        for index in 0..<count {
            let entry = index * entrySize
            guard integer(table, entry, 4) == 4 /* PT_NOTE */, let notes = read(integer(table, entry + 32, 8), at: integer(table, entry + 8, 8)) else { continue }
            var cursor = 0
            while cursor + 12 <= notes.count {
                let nameSize = integer(notes, cursor, 4), descriptionSize = integer(notes, cursor + 4, 4), type = integer(notes, cursor + 8, 4)
                let name = cursor + 12
                let description = name + ((nameSize + 3) & ~3)
                guard description + descriptionSize <= notes.count else { break }
                if type == 3 /* NT_GNU_BUILD_ID */, nameSize == 4, notes[name..<name + 4] == [0x47, 0x4E, 0x55, 0] {
                    return Array(notes[description..<description + descriptionSize])
                }
                cursor = description + ((descriptionSize + 3) & ~3)
            }
        }
        return nil
        #else
        return nil
        #endif
    }
}
