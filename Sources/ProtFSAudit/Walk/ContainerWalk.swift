import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// A directory the audit walks into, named by its path below the container root.
package struct AuditDirectory: Sendable {
  /// The path below the container root, `/`-separated bytes; empty for the root.
  package var path: [UInt8]
}

/// The audit of one container: setup on the calling thread, then a `TreeWalker` whose threads each
/// check entries with their own copy of a `Worker`.
package struct ContainerWalk: Sendable {
  package let unit: AuditTarget.Unit
  package let configuration: AuditConfiguration
  package let matcher: RuleMatcher
  package let sink: FindingSink

  package func run() -> AuditSummary {
    var setup = Worker(walk: self, lockState: AuditLockState.unknown, rootFD: -1, matcher: matcher, owned: [])
    if let entry = unit.entry, let reason = entry.notAContainerReason {
      setup.emit(
        .notAContainer,
        "'\(entry.name)' in \(Device.containersDirectoryName)/ is not a container: \(reason).",
        expected: "a directory named by a bundle id", actual: entry.kind.rawValue)
      guard unit.isDirectory else { return setup.finish() }
    }
    let root: DirectoryHandle
    do {
      root = try DirectoryHandle(path: unit.absolutePath)
    } catch {
      setup.unreadable("open the container", errno: error.errno ?? EIO)
      return setup.finish()
    }
    let rootFD = root.fd
    setup.rootFD = rootFD

    let (containerDefault, rootOwn) = rootClasses(&setup, rootFD: rootFD)
    let owned = ownedTemporaryFiles(&setup)

    let lockState = self.lockState(&setup)
    let seal = sealKeys(&setup)
    let template = Worker(
      walk: self, lockState: lockState, rootFD: rootFD, matcher: matcher, owned: owned, seal: seal)
    let inheritance = ClassInheritance(ancestor: rootOwn ?? unit.inheritedClass, containerDefault: containerDefault)
    let predicted = predictSystemDirectories(&setup, root: root, inheritance: inheritance)
    checkAppDeclarations(&setup, root: root, inheritance: inheritance, predicted: predicted)
    let (workers, _) = TreeWalker(threads: configuration.threads).walk(
      [TreeWalker.Root(root, AuditDirectory(path: []), inheritance: inheritance)], visitor: template)
    var summary = setup.finish()
    for var worker in workers { summary.merge(worker.finish()) }
    return summary
  }
}

extension ContainerWalk {
  /// The container's default class and the root's own class, each reported when it is corrupt (and
  /// the default when the entitlements ask for another).
  fileprivate func rootClasses(_ setup: inout Worker, rootFD: Int32) -> (ProtectionClass, ProtectionClass?) {
    var containerDefault = ProtectionClass.containerDefault
    // Only a container has a default class.
    switch unit.isContainer
      ? setup.classAttribute(AttributeName.defaultClass, dirfd: rootFD, name: nil) : .absent
    {
    case .value(let value): containerDefault = value
    case .corrupt(let shown):
      setup.emit(
        .corruptClass,
        "The container's default class (\(AttributeName.defaultClass)) holds \(shown), which is not a protection class; class C applies.",
        actual: shown)
    case .absent, .vanished: break
    case .failed(let code): setup.unreadable("read the default class of", errno: code)
    }
    if let wanted = configuration.entitlementsDefault, wanted != containerDefault {
      setup.emit(
        .defaultClassMismatch,
        "The container's default class is \(containerDefault.shortName) but the entitlements ask for \(wanted.shortName).",
        expected: "= \(wanted.shortName)", actual: containerDefault.shortName)
    }
    var rootOwn: ProtectionClass?
    switch setup.classAttribute(AttributeName.protectionClass, dirfd: rootFD, name: nil) {
    case .value(let value): rootOwn = value
    case .corrupt(let shown):
      setup.emit(
        .corruptClass, "The container root's class holds \(shown), which is not a protection class.", actual: shown)
    case .absent, .vanished: break
    case .failed(let code): setup.unreadable("read the class of", errno: code)
    }
    return (containerDefault, rootOwn)
  }

  /// The temporary file names of the container's download tasks (reported when they cannot be read).
  fileprivate func ownedTemporaryFiles(_ setup: inout Worker) -> Set<String> {
    var owned: Set<String> = []
    do {
      // A tree outside a device, or whose name is not a bundle id, has no task store.
      if let device = unit.device, let bundleID = try? BundleID(unit.name) {
        owned = Set(try configuration.downloadTasks(device).tasks(for: bundleID).compactMap(\.temporaryFileName))
      }
    } catch {
      setup.emit(.unreadable, "Cannot tell which temp downloads have a task: \(error.description)")
      setup.summary.incomplete = true
    }

    return owned
  }
  /// The lock state to judge locked-out items by: the configuration's, else the device's record.
  fileprivate func lockState(_ setup: inout Worker) -> any LockExpectation {
    if let given = configuration.lockState { return given }
    guard let device = unit.device, device.isInitialized else { return AuditLockState.unknown }
    if LockStore.hasJournal(device) {
      setup.emit(
        .lockedOut,
        "A lock transition of the device '\(device.root)' was interrupted, so items may be locked out; the next lock, unlock or status of the device finishes it.",
        expected: "no interrupted transition", actual: "transition.json present")
      return TransitionInProgress()
    }
    do {
      return try LockStore(device).record(now: Date()).protection
    } catch {
      setup.emit(.unreadable, "Cannot read the lock state of the device '\(device.root)': \(error.description)")
      setup.summary.incomplete = true
      return AuditLockState.unknown
    }
  }
}

extension ContainerWalk {
  /// The keys of the container's device when it is sealed; nil for an unsealed device or a tree
  /// outside any. Keys that cannot be read are reported (the audit is incomplete), and the records
  /// are then checked against their files' classes only.
  fileprivate func sealKeys(_ setup: inout Worker) -> AuditSeal? {
    guard let device = unit.device, device.isInitialized else { return nil }
    let sealed: Bool
    do { sealed = try SealStore(device: device).isSealed() } catch {
      setup.emit(.unreadable, "Cannot tell whether the device '\(device.root)' is sealed: \(error.description)")
      setup.summary.incomplete = true
      return nil
    }
    guard sealed else { return nil }
    do {
      return AuditSeal(files: try SealedFiles(device: device))
    } catch {
      setup.emit(
        .unreadable,
        "Cannot read the keys of the sealed device '\(device.root)': \(error.description); key records are "
          + "checked against their files' classes only.")
      setup.summary.incomplete = true
      return AuditSeal(files: nil)
    }
  }
}

/// A finding's texts, built once per rule, class and source: most findings repeat one.
package struct CachedText {
  package var message: String
  package var actual: String
  package var expected: String?

  /// The slot of a class and its source in a per-rule table of 15.
  package static func slot(_ effective: ProtectionClass, _ source: ClassSource) -> Int {
    let sourceIndex =
      switch source {
      case .own: 0
      case .inherited: 1
      case .default: 2
      }
    return effective.strength * 3 + sourceIndex
  }
}

/// What reading a class attribute gave.
package enum ClassReading {
  case value(ProtectionClass)
  case absent
  case corrupt(String)
  case vanished
  case failed(Int32)
}
