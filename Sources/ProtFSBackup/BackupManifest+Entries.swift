import Foundation
import ProtFS
import ProtFSSystem

extension BackupManifest {
  /// What a row describes (the `flags` column).
  package enum Kind: Int, Sendable {
    case file = 1
    case directory = 2
    case symlink = 4
  }

  /// One file, directory or symlink of the backup.
  package struct Entry: Sendable {
    /// The store's name for its contents: 40 hexadecimal digits.
    package var fileID: String
    /// Its domain (`AppDomain-com.example.app`).
    package var domain: String
    /// Its path inside the domain.
    package var relativePath: String
    /// What it is.
    package var kind: Kind
    /// Its metadata.
    package var metadata: BackupFileMetadata
  }

  /// Where `entry`'s contents are in the file store (`bucket/name`, below the backup folder), when
  /// its file ID names a place there: 40 lowercase hexadecimal digits.
  package func storeName(_ entry: Entry) -> (bucket: String, name: String)? {
    guard entry.fileID.utf8.count == 40,
      entry.fileID.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
    else { return nil }
    return (String(entry.fileID.prefix(2)), entry.fileID)
  }
}

/// A file's metadata, as the backup's `MBFile` archive records it.
package struct BackupFileMetadata: Sendable, Equatable {
  /// The permission and type bits.
  package var mode: UInt32
  /// The size in bytes.
  package var size: Int64
  /// The Data Protection class number (1 complete, 2 complete-unless-open, 3 until-first-auth, 4
  /// none; anything else is unknown).
  package var protectionClass: Int64
  /// Seconds since 1970.
  package var lastModified: Int64
  /// Seconds since 1970.
  package var birth: Int64
  /// A symlink's target.
  package var target: String?
  /// The digest of the contents (SHA-1, or SHA-256), where the manifest records one.
  package var digest: Data?

  /// A file's own key, wrapped (encrypted backups): four bytes naming its class, then the key.
  package var encryptionKey: [UInt8]?

  /// The metadata in `archive` (an NSKeyedArchiver binary plist whose root object is an
  /// `MBFile`), or nil when it holds none. Integers missing from the `MBFile` are 0, as
  /// NSKeyedUnarchiver answers; objects (`Target`, `Digest`, `EncryptionKey`) are followed one
  /// `UID` into `$objects`, data either itself or an `NSData`'s `NS.data`.
  init?(archive: UnsafeRawBufferPointer) {
    guard archive.count <= 1 << 20, let plist = BinaryPropertyList(archive), let root = plist.dictionary(plist.top),
      let archiver = plist.value(root, "$archiver"), plist.isString(archiver, "NSKeyedArchiver"),
      let objects = plist.value(root, "$objects").flatMap(plist.array),
      let top = plist.value(root, "$top").flatMap(plist.dictionary),
      let file = plist.value(top, "root").flatMap(plist.uid).flatMap({ plist.element(objects, $0) })
        .flatMap(plist.dictionary),
      let type = plist.value(file, "$class").flatMap(plist.uid).flatMap({ plist.element(objects, $0) })
        .flatMap(plist.dictionary),
      let name = plist.value(type, "$classname"), plist.isString(name, "MBFile")
    else { return nil }
    func integer(_ key: StaticString) -> Int64 { plist.value(file, key).flatMap(plist.integer) ?? 0 }
    func object(_ key: StaticString) -> Int? {
      plist.value(file, key).flatMap(plist.uid).flatMap { plist.element(objects, $0) }
    }
    func bytes(_ key: StaticString) -> [UInt8]? {
      guard let object = object(key) else { return nil }
      return plist.data(object) ?? plist.dictionary(object).flatMap { plist.value($0, "NS.data") }.flatMap(plist.data)
    }
    mode = UInt32(truncatingIfNeeded: integer("Mode"))
    size = max(0, integer("Size"))
    protectionClass = integer("ProtectionClass")
    lastModified = integer("LastModified")
    birth = integer("Birth")
    target = object("Target").flatMap(plist.string).flatMap { $0 == "$null" ? nil : $0 }
    digest = bytes("Digest").map { Data($0) }
    encryptionKey = bytes("EncryptionKey")
  }

  /// The class `protectionClass` names, or nil for a number that names none.
  package var knownClass: ProtectionClass? {
    switch protectionClass {
    case 1: .complete
    case 2: .completeUnlessOpen
    case 3: .completeUntilFirstUserAuthentication
    case 4: ProtectionClass.none
    default: nil
    }
  }
}
