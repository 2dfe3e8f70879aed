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

  /// The own class of `name` (a `dirent`'s name) in `parent`.
  package static func protectionClass(_ parent: DirectoryHandle, _ name: UnsafePointer<CChar>) -> Read<ProtectionClass>
  {
    withUnsafeTemporaryAllocation(byteCount: 64, alignment: 1) { buffer in
      switch Kernel.getAttribute(dirfd: parent.fd, rawName: name, attribute: classAttribute, into: buffer) {
      case .success(let count):
        if let value = ProtectionClass(attributeBytes: UnsafeRawBufferPointer(rebasing: buffer[..<count])) {
          return .value(value)
        }
        return .unusual
      case .failure(.noData): return .absent
      case .failure: return .unusual
      }
    }
  }

  /// The class attribute's name as a C string, made once.
  nonisolated(unsafe) private static let classAttribute: UnsafePointer<CChar> = {
    let name = AttributeName.protectionClass.utf8CString
    let copy = UnsafeMutablePointer<CChar>.allocate(capacity: name.count)
    name.withUnsafeBufferPointer { copy.initialize(from: $0.baseAddress!, count: name.count) }
    return UnsafePointer(copy)
  }()

  /// Whether `name` in `parent` may carry a saved-mode record: false only when the kernel says
  /// it has none, so anything unusual (EACCES, a value too long) goes to the reader that works
  /// around permission bits. Unlock asks this of every item, and most have no record.
  package static func hasSavedMode(_ parent: DirectoryHandle, _ name: FileName) -> Bool {
    switch name.withCString({ SavedModeRecord.presence(dirfd: parent.fd, name: $0) }) {
    case .success(let present): present
    case .failure(let e): e != .noSuchFile
    }
  }
}
