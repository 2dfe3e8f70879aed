import Foundation
import ProtFSSystem

/// Reads a property list someone else wrote (a backup's `Manifest.plist`, an app's `Info.plist`,
/// an entitlements file) within bounds, before PropertyListSerialization sees it.
///
/// PropertyListSerialization builds the whole tree, copying every object as often as it is
/// referenced: 350 bytes of binary plist whose arrays each hold the one before twice are 2^60
/// nodes, and took an import past a gigabyte until it crashed; an XML plist nested a million
/// levels deep overflows its stack. So a binary plist's trailer, offset table and every object are
/// checked first, and its object graph walked once (each object's size memoised, a cycle refused)
/// to count the nodes, the bytes of strings and data and the depth of the tree it expands to; an
/// XML one's elements and their nesting are counted. Only what is within `Limits` is parsed. Other
/// formats (OpenStep's, UTF-16 XML) are refused: none of the three is written in them.
package enum BoundedPropertyList {
  /// How large a property list may be.
  package struct Limits: Sendable {
    /// The most bytes of the file.
    package var bytes: Int
    /// The most nodes of the tree it expands to (every object counted as often as it is reached).
    package var nodes = 100_000
    /// The most bytes of strings and data in that tree.
    package var expandedBytes: Int
    /// The deepest nesting of arrays and dictionaries.
    package var depth = 64

    /// Limits for a file of at most `bytes` bytes, whose strings and data may expand to four times
    /// that.
    package init(bytes: Int) {
      self.bytes = bytes
      expandedBytes = 4 * bytes
    }
  }

  /// Why a property list is not read: `reason` completes "…is not a property list protfs reads: ".
  package struct Refusal: Error, Equatable {
    /// What is wrong with it, as a clause.
    package var reason: String
  }

  /// The value of the property list in `bytes` (what PropertyListSerialization gives), or why it
  /// is refused.
  package static func parse(_ bytes: [UInt8], limits: Limits) -> Result<Any, Refusal> {
    guard bytes.count <= limits.bytes else {
      return .failure(Refusal(reason: "it is larger than \(limits.bytes) bytes"))
    }
    let checked: Refusal?
    if bytes.starts(with: Array("bplist00".utf8)) {
      checked = checkBinary(bytes, limits)
    } else if isXML(bytes) {
      checked = checkXML(bytes, limits)
    } else {
      checked = Refusal(reason: "it is neither an XML nor a binary property list")
    }
    if let checked { return .failure(checked) }
    do {
      return .success(try PropertyListSerialization.propertyList(from: Data(bytes), options: [], format: nil))
    } catch {
      return .failure(Refusal(reason: FailureReason.of(error)))
    }
  }

  /// Why the binary plist `bytes` is refused, or nil.
  private static func checkBinary(_ bytes: [UInt8], _ limits: Limits) -> Refusal? {
    bytes.withUnsafeBytes { raw in
      guard let plist = BinaryPropertyList(raw) else {
        return Refusal(reason: "its trailer or offset table does not fit its bytes: it is damaged")
      }
      switch plist.expansion(nodes: limits.nodes, bytes: limits.expandedBytes, depth: limits.depth) {
      case .success: return nil
      case .failure(.damaged(let object)):
        return Refusal(reason: "its object \(object) cannot be read (an offset, length or marker that does not fit)")
      case .failure(.objects(let count)):
        return Refusal(reason: "it holds \(count) objects, more than the \(limits.nodes) protfs reads")
      case .failure(.nodes):
        return Refusal(
          reason:
            "its objects expand to more than \(limits.nodes) nodes (arrays or dictionaries that hold one another many times over)"
        )
      case .failure(.bytes):
        return Refusal(reason: "its strings and data expand to more than \(limits.expandedBytes) bytes")
      case .failure(.depth):
        return Refusal(reason: "it nests arrays and dictionaries deeper than \(limits.depth) levels")
      case .failure(.cycle):
        return Refusal(reason: "an array or dictionary in it holds itself")
      }
    }
  }

  /// Whether `bytes` start as an XML document does: `<` after blanks (and a UTF-8 byte order mark).
  private static func isXML(_ bytes: [UInt8]) -> Bool {
    var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
    while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    return index < bytes.count && bytes[index] == UInt8(ascii: "<")
  }

  /// Why the XML plist `bytes` is refused, or nil: its elements are counted and their nesting
  /// measured. Comments, CDATA sections and processing instructions hold no element; any other
  /// `<!…>` (a document type) is skipped to its first `>`, so that what a parser may take for
  /// elements after it is counted too; quoted attribute values are skipped whole. What is not
  /// well formed is left for PropertyListSerialization to refuse.
  private static func checkXML(_ bytes: [UInt8], _ limits: Limits) -> Refusal? {
    let (comment, commentEnd) = (Array("<!--".utf8), Array("-->".utf8))
    let (cdata, cdataEnd) = (Array("<![CDATA[".utf8), Array("]]>".utf8))
    let (instruction, instructionEnd) = (Array("<?".utf8), Array("?>".utf8))
    let declaration = Array("<!".utf8)
    let open = UInt8(ascii: "<")
    let close = UInt8(ascii: ">")
    let slash = UInt8(ascii: "/")
    var depth = 0
    var nodes = 0
    var index = 0
    while index < bytes.count {
      guard bytes[index] == open else {
        index += 1
        continue
      }
      let rest = bytes[index...]
      if rest.starts(with: comment) {
        index = skip(bytes, past: commentEnd, from: index + 4)
      } else if rest.starts(with: cdata) {
        index = skip(bytes, past: cdataEnd, from: index + 9)
      } else if rest.starts(with: instruction) {
        index = skip(bytes, past: instructionEnd, from: index + 2)
      } else if rest.starts(with: declaration) {
        index = skip(bytes, past: [close], from: index + 2)
      } else if rest.starts(with: [open, slash]) {
        depth -= 1
        index = skip(bytes, past: [close], from: index + 2)
      } else {
        let end = endOfStartTag(bytes, from: index + 1)
        nodes += 1
        if end < bytes.count, bytes[end - 1] != slash { depth += 1 }
        index = end + 1
        // The `<plist>` element around the value is one level more than the value's own.
        guard depth <= limits.depth + 1 else {
          return Refusal(reason: "it nests elements deeper than \(limits.depth) levels")
        }
        guard nodes <= limits.nodes else {
          return Refusal(reason: "it holds more than \(limits.nodes) elements")
        }
      }
    }
    return nil
  }

  /// The index just past the first `terminator` in `bytes` from `from`, or the end.
  private static func skip(_ bytes: [UInt8], past terminator: [UInt8], from: Int) -> Int {
    var index = from
    while index + terminator.count <= bytes.count {
      if bytes[index] == terminator[0], bytes[index..<index + terminator.count].elementsEqual(terminator) {
        return index + terminator.count
      }
      index += 1
    }
    return bytes.count
  }

  /// The index of the `>` that ends the start tag whose name begins at `from`, over quoted
  /// attribute values (or the end).
  private static func endOfStartTag(_ bytes: [UInt8], from: Int) -> Int {
    var end = from
    var quote: UInt8?
    while end < bytes.count {
      let byte = bytes[end]
      if let open = quote {
        if byte == open { quote = nil }
      } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
        quote = byte
      } else if byte == UInt8(ascii: ">") {
        break
      }
      end += 1
    }
    return end
  }
}
