import ProtFS

/// `protfs init-cache BUNDLE-ID`: the nsurlsessiond Downloads directory, unprotected.
package enum InitCacheCommand {
  package static let command = Command(
    name: "init-cache",
    abstract: "Create the background-download cache directory with class none.",
    discussion: """
      Creates (with the container, if needed) the directory background URLSession downloads write
      their temp files into:
        <container>/Library/Caches/com.apple.nsurlsessiond/Downloads/<bundle-id>
      with protection class none (or --class), so that downloads keep working while the device is
      locked. The Downloads directory above it, which holds only such directories, is made with
      the same class, or given it when its own is stronger than until-first-auth. Prints the
      directory's absolute path as the only line on standard output. Running it again is safe; a
      class change is reported on standard error.
      """,
    arguments: [InitCommand.bundleID],
    options: [protectionClass],
    run: run
  )

  /// `--class CLASS`.
  package static let protectionClass = Option.value(
    "class", "class", help: "The directory's protection class (default: none).")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try invocation.bundleID(invocation.required(InitCommand.bundleID))
    let protectionClass = try invocation.value(Self.protectionClass).map(invocation.protectionClass) ?? .none
    let wasInitialized = invocation.device.isInitialized
    let result = try invocation.device.initCache(bundleID, protectionClass: protectionClass)
    InitCommand.noteDevice(invocation, made: !wasInitialized)
    if result.containerCreated {
      Console.err("Created container \(bundleID).")
      InitCommand.noteNearMiss(bundleID, on: invocation.device)
    }
    if let previous = result.downloadsParentPreviousClass {
      let parent = String(result.path[..<(result.path.lastIndex(of: "/") ?? result.path.endIndex)])
      Console.err(
        "Changed the class of \(parent) from \(previous.protectionClass.name) (\(previous.source.rawValue)) to \(result.protectionClass.name)."
      )
    }
    if let previous = result.previousClass {
      Console.err(
        "Changed the class of \(result.path) from \(previous.protectionClass.name) (\(previous.source.rawValue)) to \(result.protectionClass.name)."
      )
    }
    Console.out(result.path)
    return 0
  }
}
