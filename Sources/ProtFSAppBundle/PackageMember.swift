import ProtFSSystem

/// One file of an app package (its `Info.plist`, its executable), read by offset: an executable may
/// be hundreds of megabytes, and only its headers and its code signature are read.
///
/// A member in an archive is decompressed as a stream, so reads are cheapest in increasing order
/// of offset; `MachOReader` reads each file that way.
protocol PackageMember: AnyObject {
  /// The member's path, for messages: the package's path, then the member's inside it.
  var path: String { get }
  /// The member's size in bytes (for an archive's member, the size its entry declares).
  var size: Int { get }
  /// `count` bytes from `offset`, which the caller has checked lie within `size`. Throws naming the
  /// member when fewer are there.
  func read(_ offset: Int, _ count: Int) throws(ProtFSError) -> [UInt8]
}

extension PackageMember {
  /// The whole member, which is at most `limit` bytes (else an error naming it).
  func readAll(limit: Int) throws(ProtFSError) -> [UInt8] {
    guard size <= limit else {
      throw AppPackageError.malformed(path, "it is larger than \(limit) bytes (\(size))")
    }
    return try read(0, size)
  }
}
