import CProtFSSys
import Foundation

/// The type of a directory entry, from `d_type` or `st_mode`.
public enum FileKind: String, Sendable, Codable {
  /// A regular file.
  case file
  /// A directory.
  case directory
  /// A symbolic link, never followed.
  case symlink
  /// A FIFO, socket or device node.
  case other
  /// `d_type` was `DT_UNKNOWN`: the caller must `stat`.
  case unknown

  /// The kind for a `d_type` value.
  package init(direntType: UInt8) {
    switch Int32(direntType) {
    case Int32(DT_REG): self = .file
    case Int32(DT_DIR): self = .directory
    case Int32(DT_LNK): self = .symlink
    case Int32(DT_UNKNOWN): self = .unknown
    default: self = .other
    }
  }

  /// The kind for an `st_mode` value.
  public init(mode: mode_t) {
    switch mode & S_IFMT {
    case S_IFREG: self = .file
    case S_IFDIR: self = .directory
    case S_IFLNK: self = .symlink
    default: self = .other
    }
  }
}

/// Permission bits, written as `0o` literals (swift-system's `FilePermissions`).
public struct FilePermissions: OptionSet, Sendable, Hashable, CustomStringConvertible {
  /// The bits, `0o7777` at most.
  public var rawValue: UInt32
  /// Wraps permission bits.
  public init(rawValue: UInt32) { self.rawValue = rawValue & 0o7777 }

  /// Read, write and execute for the owner.
  public static let ownerReadWriteExecute = FilePermissions(rawValue: 0o700)
  /// Read for the group and others.
  public static let groupOtherRead = FilePermissions(rawValue: 0o044)
  /// Every read bit.
  public static let allRead = FilePermissions(rawValue: 0o444)
  /// Every write bit.
  public static let allWrite = FilePermissions(rawValue: 0o222)

  /// `ls -l` style, for example `rw-r--r--`.
  public var description: String {
    let letters: [Character] = ["r", "w", "x"]
    var text = ""
    for shift in stride(from: 6, through: 0, by: -3) {
      for (index, letter) in letters.enumerated() {
        text.append(rawValue & (0o4 >> UInt32(index)) << UInt32(shift) != 0 ? letter : "-")
      }
    }
    return text
  }

  /// Octal, for example `0644`.
  public var octal: String { "0" + String(rawValue, radix: 8) }
}

/// The parts of `stat(2)` that protfs uses.
public struct FileStatus: Sendable, Equatable {
  /// The item's type.
  public var kind: FileKind
  /// The permission bits.
  public var permissions: FilePermissions
  /// Size in bytes.
  public var size: Int64
  /// Blocks of 512 bytes allocated on disk.
  public var blocks: Int64
  /// Owner.
  public var uid: UInt32
  /// Group.
  public var gid: UInt32
  /// Device number, to tell filesystems apart.
  public var device: UInt64
  /// Inode number.
  public var inode: UInt64
  /// Last modification.
  public var modified: Date
  /// Last access.
  public var accessed: Date
  /// Number of hard links.
  public var linkCount: UInt64

  package init(_ s: stat) {
    kind = FileKind(mode: s.st_mode)
    permissions = FilePermissions(rawValue: UInt32(s.st_mode) & 0o7777)
    size = Int64(s.st_size)
    blocks = Int64(s.st_blocks)
    uid = s.st_uid
    gid = s.st_gid
    device = UInt64(s.st_dev)
    inode = UInt64(s.st_ino)
    modified = Date(
      timeIntervalSince1970: TimeInterval(s.st_mtim.tv_sec) + TimeInterval(s.st_mtim.tv_nsec) / 1e9)
    accessed = Date(
      timeIntervalSince1970: TimeInterval(s.st_atim.tv_sec) + TimeInterval(s.st_atim.tv_nsec) / 1e9)
    linkCount = UInt64(s.st_nlink)
  }
}
