/// This process's mount table (`/proc/self/mountinfo`), read byte by byte: every launch reads it a
/// few times, and splitting its text as Swift strings cost more than the kernel's read.
package enum MountInfo {
  /// One mount: the fields protfs reads of its line.
  package struct Entry: Sendable, Equatable {
    /// The directory of the file system mounted there (field 4: `/` unless a part is bound).
    package var root: String
    /// Where it is mounted (field 5), unescaped.
    package var mountpoint: String
    /// Its file system type (the first field after the `-`), such as `fuse.protfs` or `cgroup2`.
    package var type: String
  }

  /// The mounts this process sees; empty when the table cannot be read.
  package static func entries() -> [Entry] {
    guard let bytes = Kernel.readKernelFile("/proc/self/mountinfo", limit: 1 << 26) else { return [] }
    return parse(bytes)
  }

  /// The mounts `table` lists (mountinfo's format: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS
  /// [OPTIONAL...] - TYPE SOURCE SUPER"); a line not of that shape is passed over.
  package static func parse(_ table: [UInt8]) -> [Entry] {
    var entries: [Entry] = []
    for line in table.split(separator: 0x0A) {
      let fields = line.split(separator: 0x20)
      guard fields.count > 6, let dash = fields.firstIndex(where: { $0.count == 1 && $0.first == 0x2D }),
        dash > 5, dash + 1 < fields.count
      else { continue }
      entries.append(
        Entry(
          root: unescape(fields[3]), mountpoint: unescape(fields[4]),
          type: String(decoding: fields[dash + 1], as: UTF8.self)))
    }
    return entries
  }

  /// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
  static func unescape(_ field: ArraySlice<UInt8>) -> String {
    guard field.contains(0x5C) else { return String(decoding: field, as: UTF8.self) }
    var bytes: [UInt8] = []
    var index = field.startIndex
    while index < field.endIndex {
      let byte = field[index]
      if byte == 0x5C, field.endIndex - index > 3,
        case let digits = field[(index + 1)...(index + 3)], digits.allSatisfy({ (0x30...0x37).contains($0) }),
        case let value = digits.reduce(0, { $0 * 8 + Int($1 - 0x30) }), value < 256
      {
        bytes.append(UInt8(value))
        index += 4
      } else {
        bytes.append(byte)
        index += 1
      }
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}
