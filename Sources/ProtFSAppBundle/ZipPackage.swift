import CZip
import Foundation
import ProtFSSystem

/// An `.ipa`: a zip archive holding `Payload/NAME.app/`, read in memory through libzip, never
/// extracted.
///
/// Anyone may have made the archive. Its entries are listed once and refused whole when one is
/// named with `..` or from the root (an archive made to write outside where it is unpacked); the
/// app's directory, and every member read, must be a file entry, not a symbolic link (which is
/// never followed), named once. A member's declared size is bounded before a byte of it is
/// decompressed, as is how many times its compressed bytes it expands to, and no more than it
/// declares is ever read: a zip bomb costs nothing.
final class ZipPackage {
  /// The most entries an archive may have.
  static let entryLimit = 500_000
  /// The most a member larger than `ratioFloor` may expand, uncompressed over compressed (code and
  /// property lists compress two to ten times; a run of zeros a thousand).
  static let ratioLimit = 100
  /// The size up to which a member may expand any amount (a small plist of repeated keys).
  static let ratioFloor = 1 << 20

  /// The archive's path, as given.
  let path: String
  /// The archive (`zip_t *`), discarded with this object.
  fileprivate let archive: OpaquePointer
  /// The name of the app's directory: `Payload/NAME.app`.
  let appDirectory: String
  /// Each entry's index, by name (directories without their trailing `/`).
  private let indexes: [String: [UInt64]]

  /// Opens the archive `fd` (a regular file, taken over) found at `path`, and lists its entries.
  init(fd: FileDescriptor, path: String) throws(ProtFSError) {
    self.path = path
    if let failure = protfs_zip_load() {
      throw ProtFSError(
        .io, "Cannot read the app '\(path)': libzip cannot be loaded (\(String(cString: failure))).", path: path,
        remedy: .advice("install libzip (Debian's libzip4)"))
    }
    var code: Int32 = 0
    guard let archive = protfs_zip_fdopen(fd.rawValue, ZIP_RDONLY | ZIP_CHECKCONS, &code) else {
      var message = [CChar](repeating: 0, count: 256)
      protfs_zip_error_message(code, &message, message.count)
      throw AppPackageError.malformed(
        path,
        "it is not a zip archive as an .ipa is (\(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).lowercased()))"
      )
    }
    // libzip owns the descriptor now, and closes it when the archive is discarded.
    _ = fd.take()
    self.archive = archive
    let count = protfs_zip_get_num_entries(archive, 0)
    guard count >= 0, count <= Self.entryLimit else {
      protfs_zip_discard(archive)
      throw AppPackageError.malformed(path, "it has \(count) entries, more than the \(Self.entryLimit) protfs reads")
    }
    var apps = Set<String>()
    var links = Set<String>()
    var indexes: [String: [UInt64]] = [:]
    do throws(ProtFSError) {
      for index in 0..<UInt64(count) {
        let name = try Self.name(of: index, in: archive, path: path)
        let components = name.split(separator: "/", omittingEmptySubsequences: false)
        let trimmed = name.hasSuffix("/") ? String(name.dropLast()) : name
        indexes[trimmed, default: []].append(index)
        if Self.isSymlink(archive, index) { links.insert(trimmed) }
        if components.count >= 2, components[0] == "Payload", components[1].hasSuffix(".app") {
          apps.insert("Payload/" + components[1])
        }
      }
      guard let app = apps.first else {
        throw AppPackageError.missing(path, "Payload/NAME.app directory, as an .ipa has")
      }
      guard apps.count == 1 else {
        throw AppPackageError.malformed(path, "it holds \(apps.count) apps (\(apps.sorted().joined(separator: ", ")))")
      }
      for directory in ["Payload", app] where links.contains(directory) {
        throw AppPackageError.symlink(path + ":" + directory)
      }
      appDirectory = app
      self.indexes = indexes
    } catch {
      protfs_zip_discard(archive)
      throw error
    }
  }

  deinit { protfs_zip_discard(archive) }

  /// The name of entry `index`, refused when it leads outside the archive (from the root, or
  /// through `..`).
  private static func name(of index: UInt64, in archive: OpaquePointer, path: String) throws(ProtFSError) -> String {
    guard let raw = protfs_zip_get_name(archive, index, 0) else {
      throw AppPackageError.malformed(path, "its entry \(index) has no name libzip reads")
    }
    let name = String(cString: raw)
    if name.hasPrefix("/") || name.hasPrefix("\\") {
      throw AppPackageError.malformed(path, "its entry '\(name)' is named from the root, outside the archive")
    }
    if name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).contains("..") {
      throw AppPackageError.malformed(path, "its entry '\(name)' is named with '..', outside the archive")
    }
    return name
  }

  /// Whether entry `index` is a symbolic link: made on Unix with the mode `S_IFLNK` in the high
  /// half of its external attributes.
  private static func isSymlink(_ archive: OpaquePointer, _ index: UInt64) -> Bool {
    var system: UInt8 = 0
    var attributes: UInt32 = 0
    guard protfs_zip_file_get_external_attributes(archive, index, 0, &system, &attributes) == 0 else { return false }
    return system == UInt8(ZIP_OPSYS_UNIX) && (attributes >> 16) & 0o170000 == 0o120000
  }

  /// The member `name` of the app's directory (a plain name: `Info.plist`, the executable), of at
  /// most `limit` bytes; nil when the archive has no such entry.
  func member(_ name: String, limit: Int) throws(ProtFSError) -> (any PackageMember)? {
    let entry = appDirectory + "/" + name
    let shown = path + ":" + entry
    guard let found = indexes[entry] else { return nil }
    guard found.count == 1, let index = found.first else {
      throw AppPackageError.malformed(shown, "the archive has \(found.count) entries of that name")
    }
    guard !Self.isSymlink(archive, index) else { throw AppPackageError.symlink(shown) }
    var status = zip_stat_t()
    guard protfs_zip_stat_index(archive, index, 0, &status) == 0,
      status.valid & UInt64(ZIP_STAT_SIZE) != 0, status.valid & UInt64(ZIP_STAT_COMP_SIZE) != 0
    else {
      throw AppPackageError.malformed(
        shown, "its entry's sizes cannot be read (\(String(cString: protfs_zip_strerror(archive))))")
    }
    guard status.size <= UInt64(limit) else {
      throw AppPackageError.malformed(
        shown, "its entry says it is \(status.size) bytes, more than the \(limit) protfs reads")
    }
    if status.size > UInt64(Self.ratioFloor), status.size / max(status.comp_size, 1) > UInt64(Self.ratioLimit) {
      throw AppPackageError.malformed(
        shown,
        "its \(status.comp_size) compressed bytes expand to \(status.size), more than \(Self.ratioLimit) times: a zip bomb"
      )
    }
    return ZipMember(package: self, index: index, path: shown, size: Int(status.size))
  }
}

/// One member of a `ZipPackage`, decompressed as a stream: a read ahead of the stream skips to
/// it; one just behind it is served from the bytes last read; one further back starts the
/// stream again (the executable's reader never asks for one).
private final class ZipMember: PackageMember {
  let path: String
  let size: Int
  /// The archive, kept open while the member is.
  private let package: ZipPackage
  private let index: UInt64
  /// The open stream (`zip_file_t *`), if any.
  private var file: OpaquePointer?
  /// How many bytes of the member the stream has given.
  private var position = 0
  /// The last bytes the stream gave, up to `position`.
  private var recent: [UInt8] = []

  init(package: ZipPackage, index: UInt64, path: String, size: Int) {
    self.package = package
    self.index = index
    self.path = path
    self.size = size
  }

  deinit { if let file { _ = protfs_zip_fclose(file) } }

  func read(_ offset: Int, _ count: Int) throws(ProtFSError) -> [UInt8] {
    precondition(offset >= 0 && count >= 0 && offset + count <= size, "a read outside the member")
    var bytes: [UInt8] = []
    var next = offset
    if next < position {
      let back = position - next
      if back <= recent.count {
        let start = recent.count - back
        bytes = Array(recent[start..<min(recent.count, start + count)])
        next += bytes.count
      } else {
        if let file { _ = protfs_zip_fclose(file) }
        (file, position, recent) = (nil, 0, [])
      }
    }
    var scratch = [UInt8](repeating: 0, count: 64 << 10)
    while position < next {
      _ = try pull(into: &scratch, min(scratch.count, next - position))
    }
    while bytes.count < count {
      let wanted = min(scratch.count, count - bytes.count)
      let got = try pull(into: &scratch, wanted)
      bytes += scratch[..<got]
    }
    return bytes
  }

  /// Reads up to `count` bytes of the stream into `buffer`, and moves `position` and `recent` on
  /// past them; throws at its end (before `size`) or on libzip's error.
  private func pull(into buffer: inout [UInt8], _ count: Int) throws(ProtFSError) -> Int {
    if file == nil {
      guard let opened = protfs_zip_fopen_index(package.archive, index, 0) else {
        throw AppPackageError.malformed(
          path, "its entry cannot be read (\(String(cString: protfs_zip_strerror(package.archive))))")
      }
      file = opened
    }
    let got = buffer.withUnsafeMutableBytes { protfs_zip_fread(file, $0.baseAddress, UInt64(count)) }
    guard got > 0 else {
      let reason = got < 0 ? String(cString: protfs_zip_file_strerror(file)) : "it ends at \(position) bytes"
      throw AppPackageError.malformed(path, "its entry is damaged or truncated (\(reason.lowercased()))")
    }
    position += Int(got)
    recent = Array((recent + buffer[..<Int(got)]).suffix(64))
    return Int(got)
  }
}
