import Foundation
import ProtFS
import ProtFSSystem

/// The directories the system makes in a container when they are missing, and the class each will
/// be made with: a new directory takes its parent's effective class, so a missing directory's
/// class is the effective class of its nearest existing ancestor. The audit reports a class that
/// would break what the system does there while the device is locked, before the directory exists:
/// the background-download failure is found before the first download while locked meets it
/// (`Worker.predict`).
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

  /// The directories predicted for the container of `bundleID`.
  package static func directories(bundleID: String) -> [Directory] {
    let lockedWorks: Set<ProtectionClass> = [.none, .completeUntilFirstUserAuthentication]
    return [
      Directory(
        path: ["Library", "Caches", "com.apple.nsurlsessiond", "Downloads", bundleID],
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

extension Worker {
  /// What the container holds of `directory`: nil when it exists (the walk checks it as it is) or
  /// cannot be predicted; else the class it will be made with and where that class comes from (the
  /// nearest ancestor with a class of its own, the container root's class, or the container's
  /// default). Each name is opened without following a link; a file or a link where a directory
  /// goes predicts nothing (making it would fail, and other checks report what is there), nor does
  /// a corrupt or unreadable class, which the walk reports.
  func predict(
    _ directory: SystemDirectoryPrediction.Directory, root: DirectoryHandle, inheritance: ClassInheritance
  ) -> (predicted: ProtectionClass, from: String)? {
    var current = root
    var effective = inheritance.effectiveClass(own: nil)
    var source = inheritance.ancestor != nil ? "the container root's class" : "the container's default class"
    for (depth, name) in directory.path.enumerated() {
      do {
        current = try current.openDirectory(name)
      } catch {
        return error.errno == ENOENT ? (effective, source) : nil
      }
      switch classAttribute(Self.classAttribute, dirfd: current.fd, name: nil) {
      case .value(let own):
        effective = own
        source = directory.path[...depth].joined(separator: "/")
      case .absent: break
      case .corrupt, .vanished, .failed: return nil
      }
    }
    return nil
  }
}

extension ContainerWalk {
  /// Reports each system directory of the container that is missing and would be made with a class
  /// that fails while the device is locked (`SystemDirectoryPrediction`).
  func predictSystemDirectories(_ setup: inout Worker, root: DirectoryHandle, inheritance: ClassInheritance) {
    guard unit.isContainer, let bundleID = try? BundleID(unit.name) else { return }
    for directory in SystemDirectoryPrediction.directories(bundleID: bundleID.rawValue) {
      guard let (predicted, from) = setup.predict(directory, root: root, inheritance: inheritance),
        !directory.works.contains(predicted)
      else { continue }
      let shownPath = directory.path.joined(separator: "/")
      setup.path = Array(shownPath.utf8)
      setup.emit(
        directory.check,
        "It does not exist yet and will be made with class \(predicted.shortName) (from \(from)): "
          + "\(directory.failure). \(directory.fix)",
        expected: "in {\(directory.works.sorted().map(\.shortName).joined(separator: ", "))} when made",
        actual: "\(predicted.shortName) (predicted)")
    }
    setup.path = []
  }
}
