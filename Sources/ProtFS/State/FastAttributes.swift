import Foundation
import ProtFSSystem

/// Allocation-free reads of the two attributes every walk touches on every item, for the hot
/// path of lock and unlock (100,000 items within `chmod -R`'s time). Anything
/// unusual (garbage, EACCES, oversize) returns `.unusual`, and the caller takes the slow path,
/// which produces the proper error or works around the permission bits.
package enum FastAttributes {
  /// The outcome of a fast read.
  package enum Read<Value> {
    case absent
    case value(Value)
    case unusual
  }

  private static let classValues: [(ProtectionClass, [UInt8])] = ProtectionClass.allCases.map {
    ($0, Array($0.rawValue.utf8))
  }

  /// The own class of `name` in `parent`.
  package static func protectionClass(_ parent: DirectoryHandle, _ name: String) -> Read<ProtectionClass> {
    withUnsafeTemporaryAllocation(byteCount: 64, alignment: 1) { buffer in
      switch Kernel.getAttribute(dirfd: parent.fd, name: name, attribute: AttributeName.protectionClass, into: buffer) {
      case .success(let count):
        for (cls, raw) in classValues where raw.count == count {
          if raw.withUnsafeBytes({ memcmp($0.baseAddress!, buffer.baseAddress!, count) }) == 0 { return .value(cls) }
        }
        return .unusual
      case .failure(.noData): return .absent
      case .failure: return .unusual
      }
    }
  }

  /// Whether `name` in `parent` may carry a saved-mode record: false only when the kernel says
  /// it has none, so anything unusual (EACCES, a value too long) goes to the reader that works
  /// around permission bits. Unlock asks this of every item, and most have no record.
  package static func hasSavedMode(_ parent: DirectoryHandle, _ name: String) -> Bool {
    withUnsafeTemporaryAllocation(byteCount: SavedModeRecord.maximumLength, alignment: 1) { buffer in
      switch Kernel.getAttribute(dirfd: parent.fd, name: name, attribute: AttributeName.savedMode, into: buffer) {
      case .failure(.noData), .failure(.noSuchFile): return false
      default: return true
      }
    }
  }
}
