import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem

/// `protfs app container BUNDLE-ID [KIND]`: an app's container path, as `xcrun simctl
/// get_app_container` prints it for the Simulator.
package enum AppContainerCommand {
  package static let command = Command(
    name: "container",
    abstract: "Print the path of an app's container, or of a directory in it (simctl get_app_container).",
    discussion: """
      KIND is data (the container itself, the default), documents (Documents), caches
      (Library/Caches), tmp (tmp) or downloads (the directory nsurlsessiond's background
      downloads of the app write into: Library/Caches/com.apple.nsurlsessiond/Downloads/BUNDLE-ID,
      made by init-cache). The path is absolute and printed whether or not that directory exists
      yet; the container must exist.
      """,
    arguments: [AppCommand.bundleArgument, kindArgument],
    run: run
  )

  /// `[<kind>]`.
  package static let kindArgument = Argument(
    name: "kind", help: "data (default), documents, caches, tmp or downloads.", arity: .optional)

  /// The kinds, in the order help lists them.
  static let kinds = ["data", "documents", "caches", "tmp", "downloads"]

  /// The device path of `kind` in `container`.
  static func path(_ kind: String, in container: Container) throws(ProtFSError) -> DevicePath {
    switch kind {
    case "documents": try container.path("Documents")
    case "caches": try container.path("Library/Caches")
    case "tmp": try container.path("tmp")
    case "downloads": container.downloadsPath
    default: container.path
    }
  }

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let kind = invocation.argument(kindArgument) ?? "data"
    guard kinds.contains(kind) else {
      var message = "'\(kind)' is not a kind of container directory; use \(kinds.joined(separator: ", "))."
      if let near = Suggestion.nearest(to: kind.lowercased(), in: kinds) { message += " Did you mean '\(near)'?" }
      throw invocation.usageError(message)
    }
    let bundleID = try AppCommand.existingApp(invocation)
    let container = invocation.device.container(bundleID)
    Console.out(invocation.device.absolutePath(try path(kind, in: container)))
    return 0
  }
}

/// `protfs app list [--json]`: the apps on the device, as `xcrun simctl listapps` lists the
/// Simulator's.
package enum AppListCommand {
  package static let command = Command(
    name: "list",
    abstract: "List the apps on the device: their containers, bundles and states (simctl listapps).",
    discussion: """
      An app is on the device once it has a container (`protfs init`). Each line names the app,
      its state (active, background, suspended or notRunning) and its container's path. With
      --json: an array of objects with bundleID, state, container (the container's absolute
      path), bundle (the app's bundle, Bundles/BUNDLE-ID.app, once it was launched; else null)
      and defaultClass (the container's default class by name, null when none was stored).
      """,
    options: [CommonOptions.json],
    run: run
  )

  /// One app, as `--json` prints it.
  struct Entry: Encodable {
    var bundleID: String
    var state: AppRecord.State
    var container: String
    var bundle: String?
    var defaultClass: String?

    // Every key is written, a missing bundle or class as null, so that a reader finds the same
    // keys in every entry.
    func encode(to encoder: Encoder) throws {
      var keys = encoder.container(keyedBy: CodingKeys.self)
      try keys.encode(bundleID, forKey: .bundleID)
      try keys.encode(state, forKey: .state)
      try keys.encode(container, forKey: .container)
      try keys.encode(bundle, forKey: .bundle)
      try keys.encode(defaultClass, forKey: .defaultClass)
    }

    enum CodingKeys: String, CodingKey { case bundleID, state, container, bundle, defaultClass }
  }

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    try device.requireInitialized()
    let store = AppStore(device: device)
    let read = try store.readRecords()
    for problem in read.unreadable { Console.err("warning: \(invocation.describe(problem))") }
    let records = Dictionary(read.records.map { ($0.bundleID, $0) }, uniquingKeysWith: { first, _ in first })
    let entries = try device.containers().map { container -> Entry in
      let id = container.bundleID.rawValue
      let state = records[id]?.settled.state ?? .notRunning
      let bundle = DevicePath.root.appending(AppBundle.directoryName).appending(id + ".app")
      let hasBundle = (try? device.status(bundle))?.kind == .directory
      return Entry(
        bundleID: id, state: state, container: container.absolutePath,
        bundle: hasBundle ? device.absolutePath(bundle) : nil, defaultClass: (try? container.defaultClass())?.name)
    }
    if invocation.flag(CommonOptions.json) {
      try Console.json(entries)
      return 0
    }
    if entries.isEmpty {
      Console.out("No app is on the device; create one with `protfs init BUNDLE-ID`.")
      return 0
    }
    let width = entries.map(\.bundleID.count).max() ?? 0
    let stateWidth = entries.map(\.state.rawValue.count).max() ?? 0
    for entry in entries {
      let id = entry.bundleID.padding(toLength: width, withPad: " ", startingAt: 0)
      let state = entry.state.rawValue.padding(toLength: stateWidth, withPad: " ", startingAt: 0)
      Console.out("\(id)  \(state)  \(entry.container)")
    }
    return 0
  }
}
