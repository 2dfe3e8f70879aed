import Foundation
import ProtFS
import ProtFSSystem

/// The app's bundle on the device, as iOS installs one: `Bundles/<bundle-id>.app/`, holding the
/// app's program and its `Info.plist`, root's and read-only to the app (docs/semantics.md §8).
///
/// Foundation finds the main bundle from the running executable's directory, so a program run
/// from its bundle gets `Bundle.main.bundleIdentifier`, `Bundle.main.infoDictionary` and the
/// `UIBackgroundModes` the app declares, as on iOS. The program is a hard link to the one the user
/// built (a copy when it lies on another file system), made again at every launch; the bundle is
/// built under a temporary name and renamed into place, so a launch killed halfway leaves the last
/// complete bundle, and its leftovers are removed by the next launch.
///
/// `@unchecked Sendable`: `info` holds what PropertyListSerialization parsed (strings, numbers,
/// dates, data, arrays and dictionaries of them), never mutated once made.
public struct AppBundle: @unchecked Sendable {
  /// The directory of the device that holds the bundles.
  public static let directoryName = "Bundles"
  /// What a bundle's directory name ends with, after the bundle id.
  public static let directoryExtension = ".app"
  /// The largest Info.plist accepted.
  public static let infoPlistLimit = 1 << 20

  /// The bundle id.
  public let bundleID: BundleID
  /// The keys of the bundle's Info.plist.
  public let info: [String: Any]

  /// The bundle of `bundleID` on `device`, with the keys of `infoPlist` (an Info.plist the app
  /// ships, XML or binary) or, without one, of the Info.plist installed before (an installed app
  /// keeps its Info.plist, also when the system relaunches it), and the keys every bundle has: its
  /// identifier, name and executable.
  public init(bundleID: BundleID, infoPlist: String?, device: Device) throws(ProtFSError) {
    var info: [String: Any] = [:]
    if let infoPlist {
      info = try Self.read(infoPlist, bundleID: bundleID)
    } else {
      info = (try? Self.readInstalled(bundleID, on: device)) ?? [:]
    }
    self.init(bundleID: bundleID, info: info)
  }

  /// The bundle of `bundleID` with the keys of the Info.plist `bytes` that an app package holds
  /// (`path` names it in messages: `protfs app install --from-app`), and the keys every bundle has.
  public init(bundleID: BundleID, infoPlist bytes: [UInt8], path: String) throws(ProtFSError) {
    self.init(bundleID: bundleID, info: try Self.parse(Data(bytes), path: path, bundleID: bundleID))
  }

  /// The bundle of `bundleID` with the keys `info`, and the keys every bundle has: its identifier,
  /// name and package type.
  private init(bundleID: BundleID, info: [String: Any]) {
    self.bundleID = bundleID
    var info = info
    info["CFBundleIdentifier"] = bundleID.rawValue
    info["CFBundleName"] = info["CFBundleName"] ?? (bundleID.rawValue.split(separator: ".").last.map(String.init) ?? "")
    info["CFBundlePackageType"] = info["CFBundlePackageType"] ?? "APPL"
    self.info = info
  }

  /// The background modes the app declares (`UIBackgroundModes`).
  public var backgroundModes: [String] { (info["UIBackgroundModes"] as? [String]) ?? [] }
  /// The BGTask identifiers the app may register and submit (`BGTaskSchedulerPermittedIdentifiers`).
  public var permittedTaskIdentifiers: [String] {
    (info["BGTaskSchedulerPermittedIdentifiers"] as? [String]) ?? []
  }

  /// The keys of the Info.plist at `path`: a dictionary whose `CFBundleIdentifier`, if it has one,
  /// is `bundleID`.
  static func read(_ path: String, bundleID: BundleID) throws(ProtFSError) -> [String: Any] {
    let remedy = Remedy.advice("give --info-plist an XML or binary property list holding a dictionary")
    switch Kernel.readNamedFile(path, limit: infoPlistLimit) {
    case .success(let bytes):
      return try parse(Data(bytes), path: path, bundleID: bundleID)
    case .failure(.tooLarge):
      throw ProtFSError(
        .invalidArgument, "The Info.plist '\(path)' is larger than \(infoPlistLimit) bytes.", path: path, remedy: remedy
      )
    case .failure(let failure):
      throw ProtFSError(
        .notFound, "Cannot read the Info.plist '\(path)': \(failure.reason).", path: path, remedy: remedy)
    }
  }

  /// The keys of the Info.plist installed in the app's bundle on `device`, read through
  /// descriptors that follow no link.
  static func readInstalled(_ bundleID: BundleID, on device: Device) throws(ProtFSError) -> [String: Any] {
    let bundle = try device.openRoot().openDirectory(Self.directoryName).openDirectory(
      bundleID.rawValue + Self.directoryExtension)
    let bytes = try AtomicFile.read(named: "Info.plist", in: bundle, limit: infoPlistLimit)
    return try parse(Data(bytes), path: bundle.pathOf("Info.plist"), bundleID: bundleID)
  }

  /// The keys of the property list `data` read from `path`: a dictionary whose
  /// `CFBundleIdentifier`, if it has one, is `bundleID`.
  private static func parse(_ data: Data, path: String, bundleID: BundleID) throws(ProtFSError) -> [String: Any] {
    let remedy = Remedy.advice("give --info-plist an XML or binary property list holding a dictionary")
    guard !data.isEmpty else {
      throw ProtFSError(.invalidArgument, "The Info.plist '\(path)' is empty.", path: path, remedy: remedy)
    }
    // Within bounds: a few hundred bytes of arrays that hold one another expand, in
    // PropertyListSerialization, to more nodes than memory holds (BoundedPropertyList).
    let parsed: Any
    switch BoundedPropertyList.parse(Array(data), limits: BoundedPropertyList.Limits(bytes: infoPlistLimit)) {
    case .success(let value):
      parsed = value
    case .failure(let refusal):
      throw ProtFSError(
        .invalidArgument, "The Info.plist '\(path)' is not a property list protfs reads: \(refusal.reason).",
        path: path, remedy: remedy)
    }
    guard let dictionary = parsed as? [String: Any] else {
      throw ProtFSError(
        .invalidArgument, "The Info.plist '\(path)' holds a \(type(of: parsed)), not a dictionary.", path: path,
        remedy: remedy)
    }
    if let named = dictionary["CFBundleIdentifier"], (named as? String) != bundleID.rawValue {
      throw ProtFSError(
        .invalidArgument, "The Info.plist '\(path)' names the bundle '\(named)', not '\(bundleID)'.", path: path,
        remedy: .advice("launch the app whose Info.plist it is, or correct its CFBundleIdentifier"))
    }
    for key in ["UIBackgroundModes", "BGTaskSchedulerPermittedIdentifiers"] {
      if let value = dictionary[key], !(value is [String]) {
        throw ProtFSError(
          .invalidArgument, "The Info.plist '\(path)' has a \(key) that is not an array of strings.",
          path: path, remedy: remedy)
      }
    }
    return dictionary
  }

  /// Builds the bundle on `device` around `program` (an executable file outside it) and returns the
  /// path of the program inside it, which is what the app is to run. Without a program (one that
  /// keeps its own path: a script), the bundle holds the Info.plist alone, which the app's next
  /// launches (the system's among them) read.
  @discardableResult
  public func install(_ program: String?, on device: Device) throws(ProtFSError) -> String {
    let root = try device.openRoot()
    try root.makeDirectory(Self.directoryName, permissions: FilePermissions(rawValue: 0o755))
    let bundles = try root.openDirectory(Self.directoryName)
    let name = bundleID.rawValue + Self.directoryExtension
    var info = self.info
    let executable = program.map { String($0.split(separator: "/").last ?? "app") } ?? ""
    if program != nil { info["CFBundleExecutable"] = executable }
    let plist = try Self.serialize(info, path: bundles.pathOf(name + "/Info.plist"))
    // Most launches run what the last one installed: a bundle that already holds this program
    // (the same file, linked) and these Info.plist bytes, and nothing else, is kept as it is.
    if Self.holds(bundles, name, program: program, as: executable, plist: plist) {
      return bundles.pathOf(name) + "/" + executable
    }
    // Best effort: what is left is removed by the next launch.
    for leftover in (try? bundles.entries()) ?? [] where leftover.name.hasPrefix("." + name + ".") {
      try? bundles.removeTree(leftover.name)
    }
    let staging = ".\(name).\(Kernel.getpid())"
    try bundles.makeDirectory(staging, permissions: FilePermissions(rawValue: 0o755))
    do {
      let directory = try bundles.openDirectory(staging)
      if let program { try Self.place(program, as: executable, in: directory) }
      try Self.write(plist, as: "Info.plist", in: directory)
      // Renamed into place in one step: over the last bundle, whose remains are then removed.
      if case .failure = Kernel.renameat2(bundles.fd, staging, bundles.fd, name, .noReplace) {
        _ = try Kernel.renameat2(bundles.fd, staging, bundles.fd, name, .exchange).orThrow(
          "install the app's bundle at", path: bundles.pathOf(name))
        try? bundles.removeTree(staging)  // the bundle replaced: best effort, the next launch removes it
      }
      return bundles.pathOf(name) + "/" + executable
    } catch {
      try? bundles.removeTree(staging)  // the installation's own error is the one to report
      throw error
    }
  }

  /// Whether `program` is a compiled Swift program (a 64-bit ELF file with the `swift5_` sections
  /// the Swift compiler emits), which is what is run from the bundle: Foundation finds its main
  /// bundle from the executable's directory. Any other program keeps its path, which it may need
  /// (an interpreter such as python3 finds its library from it; a script's own executable is its
  /// interpreter).
  public static func isSwiftProgram(_ program: String) -> Bool {
    // Never waits: a FIFO swapped in for the program (by the user who owns its directory) would
    // hold root's open until a writer came. Only a regular file is read.
    guard case .success(let fd) = Kernel.open(program, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
    else { return false }
    defer { closeDescriptor(fd) }
    var status = stat()
    guard case .success = Kernel.fstat(fd, &status), status.st_mode & S_IFMT == S_IFREG else {
      return false
    }
    func read(_ count: Int, at offset: Int) -> [UInt8]? {
      guard count >= 0, count <= 1 << 20, offset >= 0 else { return nil }
      var bytes = [UInt8](repeating: 0, count: count)
      let got = bytes.withUnsafeMutableBytes { raw in
        try? Kernel.pread(fd, raw.baseAddress, count, off_t(offset)).get()
      }
      return got == count ? bytes : nil
    }
    func integer(_ bytes: [UInt8], _ at: Int, _ size: Int) -> Int {
      (0..<size).reduce(0) { value, index in value | Int(bytes[at + index]) << (8 * index) }
    }
    // The header: magic, ELFCLASS64, little-endian; then the section headers' table and the index
    // of the one holding the section names.
    guard let header = read(64, at: 0), header[0..<6] == [0x7F, 0x45, 0x4C, 0x46, 2, 1] else { return false }
    let sections = integer(header, 0x28, 8)
    let entrySize = integer(header, 0x3A, 2)
    let names = integer(header, 0x3E, 2)
    guard entrySize >= 64, names < integer(header, 0x3C, 2),
      let entry = read(64, at: sections + names * entrySize),
      let table = read(integer(entry, 0x20, 8), at: integer(entry, 0x18, 8))
    else { return false }
    let marker = Array("swift5_".utf8)
    return table.indices.contains { start in
      start + marker.count <= table.count && Array(table[start..<(start + marker.count)]) == marker
    }
  }

  /// Whether the bundle `name` in `bundles` is what `install` would make: `plist` as its Info.plist
  /// and, with a program, that very file (device and inode) linked as `executable`, nothing else.
  /// Read without following a link; any doubt answers no, and the bundle is made again.
  private static func holds(
    _ bundles: DirectoryHandle, _ name: String, program: String?, as executable: String, plist: Data
  ) -> Bool {
    guard let bundle = try? bundles.openDirectory(name), let entries = try? bundle.entries(),
      entries.count == (program == nil ? 1 : 2),
      let stored = try? AtomicFile.read(named: "Info.plist", in: bundle, limit: plist.count + 1),
      stored.elementsEqual(plist)
    else { return false }
    guard let program else { return true }
    var source = stat()
    var linked = stat()
    guard case .success = Kernel.stat(program, &source),
      case .success = Kernel.fstatat(bundle.fd, executable, &linked, AT_SYMLINK_NOFOLLOW)
    else { return false }
    return linked.st_mode & S_IFMT == S_IFREG && source.st_dev == linked.st_dev && source.st_ino == linked.st_ino
  }

  /// Links `program` into `directory` as `name`, or copies it there when it lies on another file
  /// system or may not be linked. The file is opened once, and that file is what is linked or
  /// copied: a path swapped meanwhile (by the user who owns its directory) cannot put another file
  /// in the bundle, and a copy keeps the file's owner and mode (set-id bits dropped), so that the
  /// app may run and read it exactly as it might have at its own path.
  private static func place(_ program: String, as name: String, in directory: DirectoryHandle) throws(ProtFSError) {
    // The file itself, not a symlink to it: a linked symlink would run from where it points.
    guard let resolved = Kernel.realpath(program, nil) else {
      throw ProtFSError.system("find the program", path: program, errno: errno)
    }
    let program = String(cString: resolved)
    free(resolved)
    let source = try Kernel.open(program, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY).orThrow(
      "read the program", path: program)
    defer { closeDescriptor(source) }
    var status = stat()
    _ = try Kernel.fstat(source, &status).orThrow("read the program", path: program)
    guard status.st_mode & S_IFMT == S_IFREG else {
      throw ProtFSError(
        .invalidArgument, "The program '\(program)' is not a regular file.", path: program,
        remedy: .advice("name the program's file itself"))
    }
    // The opened file itself is linked (linkat with AT_EMPTY_PATH, or through /proc/self/fd).
    if case .success = Kernel.linkTmpfile(source, directory.fd, name) { return }
    let target = try directory.openFile(
      name, flags: O_WRONLY | O_CREAT | O_EXCL, permissions: FilePermissions(rawValue: 0o700))
    defer { closeDescriptor(target) }
    try ItemCopier.copyContents(from: source, to: target, path: directory.pathOf(name))
    _ = try Kernel.fchown(target, status.st_uid, status.st_gid).orThrow(
      "give the program its owner", path: directory.pathOf(name))
    _ = try Kernel.fchmod(target, status.st_mode & 0o755).orThrow(
      "make executable", path: directory.pathOf(name))
  }

  /// `info` as an XML property list.
  private static func serialize(_ info: [String: Any], path: String) throws(ProtFSError) -> Data {
    guard let value = PropertyListValue(info) else {
      throw ProtFSError(.io, "The Info.plist '\(path)' holds a value a property list cannot.", path: path)
    }
    do {
      return try value.xml()
    } catch {
      throw ProtFSError(
        .io, "Cannot write the Info.plist '\(path)': \(FailureReason.of(error)).", path: path)
    }
  }

  /// Writes `data` to the new file `name` (0644) in `directory`.
  private static func write(_ data: Data, as name: String, in directory: DirectoryHandle) throws(ProtFSError) {
    let fd = try directory.openFile(
      name, flags: O_WRONLY | O_CREAT | O_EXCL, permissions: FilePermissions(rawValue: 0o644))
    defer { closeDescriptor(fd) }
    try AtomicFile.writeAll(fd, data, path: directory.pathOf(name))
  }
}
