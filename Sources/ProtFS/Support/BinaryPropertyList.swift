/// A binary property list (`bplist00`, what iOS backups store each file's metadata as), read in
/// place: nothing is parsed until asked for, and nothing is bridged to Foundation's types.
///
/// The format: the header `bplist00`; the objects, each a marker byte (its type in the high
/// nibble, a length or size in the low one; `0xF` there means an integer object with the length
/// follows) and its bytes; an offset table with each object's place; and a 32-byte trailer naming
/// the sizes of offsets and of references, the number of objects, the top object and where the
/// offset table starts. Arrays and dictionaries hold references (indexes into the offset table),
/// never objects, so a reader that follows a reference only when asked, as this one does, cannot
/// be sent round a cycle; every offset, reference and length is checked against the bytes before
/// it is used, so no input reads outside them.
///
/// The bytes must outlive the reader (it keeps a pointer to them, not a copy).
///
/// `expansion(limits:)` walks the whole object graph once, for `BoundedPropertyList`, which hands
/// only a graph within bounds to PropertyListSerialization.
package struct BinaryPropertyList {
  /// What an object is, by its marker's high nibble.
  package enum Kind: UInt8 {
    case simple = 0x0  // null, false, true
    case integer = 0x1
    case real = 0x2
    case date = 0x3
    case data = 0x4
    case asciiString = 0x5
    case utf16String = 0x6
    case uid = 0x8
    case array = 0xA
    case dictionary = 0xD
  }

  /// An array's or a dictionary's references: `count` of them from `start` (a dictionary's keys;
  /// its values follow, `count` more).
  package struct Collection {
    /// How many elements (a dictionary's: keys).
    package let count: Int
    /// Where its references start.
    package let start: Int
    /// 1 for an array, 2 for a dictionary.
    package let units: Int
  }

  private let bytes: UnsafeRawBufferPointer
  private let offsetSize: Int
  private let referenceSize: Int
  private let objectCount: Int
  private let offsetTable: Int
  /// The top object's reference.
  package let top: Int
  /// How many objects the offset table lists.
  package var count: Int { objectCount }

  /// The property list in `bytes`, or nil when they are not one (a wrong header, a trailer whose
  /// sizes or places do not fit the bytes).
  package init?(_ bytes: UnsafeRawBufferPointer) {
    guard bytes.count >= 40, bytes.baseAddress != nil else { return nil }
    let header: [UInt8] = Array("bplist00".utf8)
    for index in 0..<8 where bytes[index] != header[index] { return nil }
    let trailer = bytes.count - 32
    offsetSize = Int(bytes[trailer + 6])
    referenceSize = Int(bytes[trailer + 7])
    guard (1...8).contains(offsetSize), (1...8).contains(referenceSize),
      let count = Self.bigEndian(bytes, at: trailer + 8, size: 8),
      let top = Self.bigEndian(bytes, at: trailer + 16, size: 8),
      let table = Self.bigEndian(bytes, at: trailer + 24, size: 8),
      count >= 1, count < bytes.count, top < count, table >= 9, table < trailer
    else { return nil }
    let (tableSize, overflow) = count.multipliedReportingOverflow(by: offsetSize)
    guard !overflow, table + tableSize <= trailer else { return nil }
    self.bytes = bytes
    objectCount = count
    offsetTable = table
    self.top = top
  }

  /// The unsigned big-endian number of `size` bytes at `offset`, when it fits an `Int`.
  private static func bigEndian(_ bytes: UnsafeRawBufferPointer, at offset: Int, size: Int) -> Int? {
    guard offset >= 0, size <= 8, offset <= bytes.count - size else { return nil }
    var value: UInt64 = 0
    for index in offset..<offset + size { value = value << 8 | UInt64(bytes[index]) }
    return value <= UInt64(Int.max) ? Int(value) : nil
  }

  /// Where the object `reference` starts, when the reference and its offset are in bounds.
  private func offset(of reference: Int) -> Int? {
    guard reference >= 0, reference < objectCount,
      let offset = Self.bigEndian(bytes, at: offsetTable + reference * offsetSize, size: offsetSize),
      offset >= 8, offset < offsetTable
    else { return nil }
    return offset
  }

  /// The kind of the object `reference`, its marker's low nibble and where its bytes start.
  private func marker(_ reference: Int) -> (kind: Kind, low: Int, at: Int)? {
    guard let at = offset(of: reference), let kind = Kind(rawValue: bytes[at] >> 4) else { return nil }
    return (kind, Int(bytes[at] & 0xF), at + 1)
  }

  /// A length in a marker's low nibble, or (0xF) in the integer object that follows it: the length
  /// and where the contents start.
  private func length(_ low: Int, at: Int) -> (count: Int, start: Int)? {
    if low != 0xF { return (low, at) }
    guard at < offsetTable, bytes[at] >> 4 == Kind.integer.rawValue else { return nil }
    let size = 1 << Int(bytes[at] & 0xF)
    guard size <= 8, let count = Self.bigEndian(bytes, at: at + 1, size: size) else { return nil }
    return (count, at + 1 + size)
  }

  /// Whether `count` units of `unit` bytes from `start` lie among the objects.
  private func fits(_ start: Int, _ count: Int, unit: Int) -> Bool {
    let (size, overflow) = count.multipliedReportingOverflow(by: unit)
    return !overflow && start <= offsetTable && size <= offsetTable - start
  }

  /// The integer `reference` (1, 2, 4 or 8 bytes; 16 when its value fits 64 bits signed).
  package func integer(_ reference: Int) -> Int64? {
    guard let (kind, low, at) = marker(reference), kind == .integer, low <= 4 else { return nil }
    let size = 1 << low
    guard fits(at, size, unit: 1) else { return nil }
    var value: UInt64 = 0
    for index in at + max(0, size - 8)..<at + size { value = value << 8 | UInt64(bytes[index]) }
    switch size {
    case 8: return Int64(bitPattern: value)
    case 16:
      // 16 bytes hold values from 2^63 up; only one whose upper half is zero and that fits is kept.
      for index in at..<at + 8 where bytes[index] != 0 { return nil }
      return value <= UInt64(Int64.max) ? Int64(value) : nil
    default: return Int64(value)
    }
  }

  /// The UID (a keyed archive's reference into its `$objects`) `reference`.
  package func uid(_ reference: Int) -> Int? {
    guard let (kind, low, at) = marker(reference), kind == .uid else { return nil }
    return low < 8 ? Self.bigEndian(bytes, at: at, size: low + 1) : nil
  }

  /// The bytes of the data object `reference`.
  package func data(_ reference: Int) -> [UInt8]? {
    guard let (kind, low, at) = marker(reference), kind == .data, let (count, start) = length(low, at: at),
      fits(start, count, unit: 1)
    else { return nil }
    return Array(UnsafeRawBufferPointer(rebasing: bytes[start..<start + count]))
  }

  /// The string `reference` (ASCII, or UTF-16 big-endian).
  package func string(_ reference: Int) -> String? {
    guard let (kind, low, at) = marker(reference), let (count, start) = length(low, at: at) else { return nil }
    switch kind {
    case .asciiString:
      guard fits(start, count, unit: 1) else { return nil }
      let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<start + count])
      guard slice.allSatisfy({ $0 < 0x80 }) else { return nil }
      return String(decoding: slice, as: UTF8.self)
    case .utf16String:
      guard fits(start, count, unit: 2) else { return nil }
      let units = (0..<count).map { UInt16(bytes[start + 2 * $0]) << 8 | UInt16(bytes[start + 2 * $0 + 1]) }
      return String(decoding: units, as: UTF16.self)
    default: return nil
    }
  }

  /// Whether `reference` is the ASCII string `key` (compared in place, nothing allocated).
  package func isString(_ reference: Int, _ key: StaticString) -> Bool {
    guard let (kind, low, at) = marker(reference), kind == .asciiString, let (count, start) = length(low, at: at),
      count == key.utf8CodeUnitCount, fits(start, count, unit: 1)
    else { return false }
    let expected = UnsafeRawBufferPointer(start: key.utf8Start, count: count)
    for index in 0..<count where bytes[start + index] != expected[index] { return false }
    return true
  }

  /// The array `reference`'s references.
  package func array(_ reference: Int) -> Collection? {
    collection(reference, .array, units: 1)
  }

  /// The dictionary `reference`'s keys' references (its values' follow them).
  package func dictionary(_ reference: Int) -> Collection? {
    collection(reference, .dictionary, units: 2)
  }

  private func collection(_ reference: Int, _ expected: Kind, units: Int) -> Collection? {
    guard let (kind, low, at) = marker(reference), kind == expected, let (count, start) = length(low, at: at),
      fits(start, count, unit: referenceSize * units)
    else { return nil }
    return Collection(count: count, start: start, units: units)
  }

  /// The `index`th reference of `collection` (of a dictionary: its keys, then its values).
  package func element(_ collection: Collection, _ index: Int) -> Int? {
    guard index >= 0, index < collection.count * collection.units else { return nil }
    return Self.bigEndian(bytes, at: collection.start + index * referenceSize, size: referenceSize)
  }

  /// The reference of the value for the ASCII key `key` in `dictionary`.
  package func value(_ dictionary: Collection, _ key: StaticString) -> Int? {
    for index in 0..<dictionary.count {
      if let keyReference = element(dictionary, index), isString(keyReference, key) {
        return element(dictionary, dictionary.count + index)
      }
    }
    return nil
  }

  // MARK: The whole graph

  /// Why an object graph is not handed to a parser that expands it.
  package enum GraphRefusal: Error, Equatable {
    /// An object cannot be read (an offset, length or reference outside the bytes, or a marker
    /// no property list has), with which.
    case damaged(Int)
    /// More objects than the limit.
    case objects(Int)
    /// The graph expands to more nodes than the limit: objects that hold one another many times.
    case nodes
    /// The graph's strings and data, expanded, hold more bytes than the limit.
    case bytes
    /// It nests deeper than the limit.
    case depth
    /// An array or dictionary holds itself, directly or not.
    case cycle
  }

  /// How large the tree is that a parser builds from `top` by copying every reference it follows
  /// (PropertyListSerialization does, and a few hundred bytes of arrays holding each other twice
  /// are then 2^60 nodes): its nodes and the bytes of its strings and data, each object counted as
  /// often as it is reached. Every object is read and checked once (its size memoised), so the
  /// walk costs the bytes' size, whatever the tree's; it stops at the first limit passed.
  package func expansion(nodes nodeLimit: Int, bytes byteLimit: Int, depth depthLimit: Int)
    -> Result<(nodes: Int, bytes: Int), GraphRefusal>
  {
    guard objectCount <= nodeLimit else { return .failure(.objects(objectCount)) }
    var walk = GraphWalk(plist: self, nodeLimit: nodeLimit, byteLimit: byteLimit, depthLimit: depthLimit)
    switch walk.visit(top, depth: 1) {
    case .success(let size): return .success((size.nodes, size.bytes))
    case .failure(let refusal): return .failure(refusal)
    }
  }

  /// The state of one `expansion`: per object, whether it is being visited (a cycle when met
  /// again) or done, and then its tree's size and height.
  private struct GraphWalk {
    let plist: BinaryPropertyList
    let nodeLimit: Int
    let byteLimit: Int
    let depthLimit: Int
    /// 0 not yet, 1 being visited, 2 done.
    var state: [UInt8]
    var nodes: [Int]
    var bytes: [Int]
    var heights: [Int]

    init(plist: BinaryPropertyList, nodeLimit: Int, byteLimit: Int, depthLimit: Int) {
      self.plist = plist
      self.nodeLimit = nodeLimit
      self.byteLimit = byteLimit
      self.depthLimit = depthLimit
      state = [UInt8](repeating: 0, count: plist.objectCount)
      nodes = [Int](repeating: 0, count: plist.objectCount)
      bytes = [Int](repeating: 0, count: plist.objectCount)
      heights = [Int](repeating: 0, count: plist.objectCount)
    }

    /// The size of the tree of `reference`, met at `depth` (the top is at 1).
    mutating func visit(_ reference: Int, depth: Int) -> Result<(nodes: Int, bytes: Int), GraphRefusal> {
      guard reference >= 0, reference < plist.objectCount else { return .failure(.damaged(reference)) }
      switch state[reference] {
      case 1: return .failure(.cycle)
      case 2:
        guard depth + heights[reference] <= depthLimit else { return .failure(.depth) }
        return .success((nodes[reference], bytes[reference]))
      default: break
      }
      guard depth <= depthLimit else { return .failure(.depth) }
      guard let (kind, low, at) = plist.marker(reference) else { return .failure(.damaged(reference)) }
      var size = (nodes: 1, bytes: 0)
      var height = 0
      switch kind {
      case .simple:
        guard [0, 8, 9, 15].contains(low) else { return .failure(.damaged(reference)) }
      case .integer, .real, .date:
        let valid = kind == .integer ? low <= 4 : kind == .real ? (low == 2 || low == 3) : low == 3
        guard valid, plist.fits(at, 1 << low, unit: 1) else { return .failure(.damaged(reference)) }
      case .uid:
        guard low < 8, plist.fits(at, low + 1, unit: 1) else { return .failure(.damaged(reference)) }
      case .data, .asciiString, .utf16String:
        let unit = kind == .utf16String ? 2 : 1
        guard let (count, start) = plist.length(low, at: at), plist.fits(start, count, unit: unit) else {
          return .failure(.damaged(reference))
        }
        size.bytes = count * unit
      case .array, .dictionary:
        guard let collection = plist.collection(reference, kind, units: kind == .array ? 1 : 2) else {
          return .failure(.damaged(reference))
        }
        state[reference] = 1
        for index in 0..<collection.count * collection.units {
          guard let child = plist.element(collection, index) else { return .failure(.damaged(reference)) }
          switch visit(child, depth: depth + 1) {
          case .success(let grown):
            size.nodes += grown.nodes
            size.bytes += grown.bytes
            height = max(height, heights[child] + 1)
          case .failure(let refusal):
            return .failure(refusal)
          }
          guard size.nodes <= nodeLimit else { return .failure(.nodes) }
          guard size.bytes <= byteLimit else { return .failure(.bytes) }
        }
      }
      guard size.bytes <= byteLimit else { return .failure(.bytes) }
      state[reference] = 2
      nodes[reference] = size.nodes
      bytes[reference] = size.bytes
      heights[reference] = height
      return .success(size)
    }
  }
}
