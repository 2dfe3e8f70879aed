import Foundation
import ProtFS
import ProtFSSystem

/// The directories the system makes in a container when they are missing, and the class each will
/// be made with: a new directory takes its parent's effective class, so a missing directory's
/// class is the effective class of its nearest existing ancestor. The audit reports a class that
/// would break what the system does there while the device is locked, before the directory exists:
/// the background-download failure is found before the first download while locked meets it
/// (`Worker.directoryClass`).
package struct SystemDirectoryPrediction {
  /// A directory the system makes, the classes that let it work while locked, and what fails in it.
  package struct Directory {
    /// Its path below the container root.
    package var path: [String]
    /// The check that reports it.
    package var check: BuiltInCheck
    /// The classes that work while the device is locked.
    package var works: Set<ProtectionClass>
    /// Who makes it and what fails in it while locked, as the middle of a sentence.
    package var failure: String
    /// How to fix it, as a sentence.
    package var fix: String
  }

  /// nsurlsessiond's Downloads directory of `bundleID`, below its container root.
  package static func downloadsPath(bundleID: String) -> [String] {
    ["Library", "Caches", "com.apple.nsurlsessiond", "Downloads", bundleID]
  }

  /// The directories predicted for the container of `bundleID`.
  package static func directories(bundleID: String) -> [Directory] {
    let lockedWorks: Set<ProtectionClass> = [.none, .completeUntilFirstUserAuthentication]
    return [
      Directory(
        path: downloadsPath(bundleID: bundleID),
        check: .predictedDownloadFailure, works: lockedWorks,
        failure:
          "nsurlsessiond makes it at the app's first background download and writes the download's temp file in it; "
          + "a download that starts or runs while the device is locked then fails with EPERM (Operation not permitted)",
        fix: "Create it now with class none: protfs init-cache \(bundleID)."),
      Directory(
        path: ["tmp"], check: .predictedTemporaryDirectoryClass, works: lockedWorks,
        failure:
          "the system makes it again when it is missing; what the app or the system writes there while the device "
          + "is locked fails with EPERM, such as the partial file of a background download cancelled while "
          + "locked, which its resume data needs",
        fix: "Create it with a class that allows it (mkdir it, then protfs set-class --bundle \(bundleID) "
          + "until-first-auth tmp), or create the container again with a weaker default class."),
      Directory(
        path: ["Library", "Caches"], check: .predictedTemporaryDirectoryClass, works: lockedWorks,
        failure:
          "the system makes it again when it is missing; caches written while the device is locked (by a background "
          + "fetch or download) fail with EPERM, and nsurlsessiond's Downloads directory below it inherits the class",
        fix: "Create it with a class that allows it (mkdir it, then protfs set-class --bundle \(bundleID) "
          + "until-first-auth Library/Caches), or create the container again with a weaker default class."),
    ]
  }
}

/// The class a directory of a container has, or will be made with when it does not exist yet.
package struct DirectoryClass {
  /// The effective class it has, or the one it will be made with.
  package var protectionClass: ProtectionClass
  /// Where the class comes from: the nearest ancestor (or the directory) with a class of its own,
  /// the container root's class, or the container's default.
  package var source: String
  /// Whether the directory exists.
  package var exists: Bool
}

extension Worker {
  /// The class of the directory at `path` below the container root: its effective class when it
  /// exists, else the class it will be made with, which a new directory takes from its nearest
  /// existing ancestor. Each name is opened without following a link; a file or a link where a
  /// directory goes gives nil (making it would fail, and other checks report what is there), as
  /// does a corrupt or unreadable class, which the walk reports.
  func directoryClass(_ path: [String], root: DirectoryHandle, inheritance: ClassInheritance) -> DirectoryClass? {
    var current = root
    var found = DirectoryClass(
      protectionClass: inheritance.effectiveClass(own: nil),
      source: inheritance.ancestor != nil ? "the container root's class" : "the container's default class",
      exists: true)
    for (depth, name) in path.enumerated() {
      do {
        current = try current.openDirectory(name)
      } catch {
        guard error.errno == ENOENT else { return nil }
        found.exists = false
        return found
      }
      switch classAttribute(Self.classAttribute, dirfd: current.fd, name: nil) {
      case .value(let own):
        found.protectionClass = own
        found.source = path[...depth].joined(separator: "/")
      case .absent: break
      case .corrupt, .vanished, .failed: return nil
      }
    }
    return found
  }
}

extension ContainerWalk {
  /// Reports each system directory of the container that is missing and would be made with a class
  /// that fails while the device is locked (`SystemDirectoryPrediction`); returns the paths reported.
  @discardableResult
  func predictSystemDirectories(_ setup: inout Worker, root: DirectoryHandle, inheritance: ClassInheritance)
    -> Set<[String]>
  {
    guard unit.isContainer, let bundleID = try? BundleID(unit.name) else { return [] }
    var reported: Set<[String]> = []
    for directory in SystemDirectoryPrediction.directories(bundleID: bundleID.rawValue) {
      guard let made = setup.directoryClass(directory.path, root: root, inheritance: inheritance), !made.exists,
        !directory.works.contains(made.protectionClass)
      else { continue }
      let predicted = made.protectionClass
      reported.insert(directory.path)
      setup.path = Array(directory.path.joined(separator: "/").utf8)
      setup.emit(
        directory.check,
        "It does not exist yet and will be made with class \(predicted.shortName) (from \(made.source)): "
          + "\(directory.failure). \(directory.fix)",
        expected: "in {\(directory.works.sorted().map(\.shortName).joined(separator: ", "))} when made",
        actual: "\(predicted.shortName) (predicted)")
    }
    setup.path = []
    return reported
  }
}
