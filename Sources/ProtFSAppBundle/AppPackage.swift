import Foundation
import ProtFS
import ProtFSSystem

/// An iOS app as a reviewer gets it, an `.ipa` (a zip archive holding `Payload/NAME.app/`) or an
/// `.app` directory, and what it declares: its bundle id and Info.plist keys, the entitlements its
/// executable's code signature carries, and what those imply for its container.
///
/// `read(_:)` reads the Info.plist and the executable's Mach-O headers and code signature, never
/// more, in memory: nothing is extracted or written. The package may be hostile; each way it can
/// be (a zip bomb, a member named with `..`, a symbolic link, a truncated or looping signature)
/// is refused with one error that names the file and what is wrong, within bounded time and
/// memory.
package struct AppPackage: Sendable {
  /// The largest Info.plist read.
  package static let infoPlistLimit = 1 << 20
  /// The largest executable read (the App Store takes none near it); only its headers and
  /// signature are kept in memory.
  package static let executableLimit = 1 << 30

  /// The package's path, as given.
  package var path: String
  /// `CFBundleIdentifier`.
  package var bundleID: BundleID
  /// `CFBundleExecutable`: the name of the executable in the bundle.
  package var executableName: String
  /// `CFBundleDisplayName`, else `CFBundleName`, if either is set.
  package var displayName: String?
  /// `CFBundleShortVersionString`, if set.
  package var version: String?
  /// `MinimumOSVersion`, if set.
  package var minimumOSVersion: String?
  /// `UIBackgroundModes`.
  package var backgroundModes: [String]
  /// `BGTaskSchedulerPermittedIdentifiers`.
  package var permittedTaskIdentifiers: [String]
  /// The Info.plist's bytes, as the package holds them (XML or binary).
  package var infoPlist: [UInt8]
  /// The executable's architectures, each with its code signature.
  package var slices: [MachOSlice]
  /// The code signature whose entitlements are the app's: the arm64 slice's, else the first
  /// signed slice's; nil when no slice is signed.
  package var signature: CodeSignature?
  /// The entitlements that signature carries, by key; nil without a signature or without an
  /// entitlements blob in it.
  package var entitlements: [String: PropertyListValue]?
  /// The default class `com.apple.developer.default-data-protection` asks for, or nil when the
  /// entitlements do not set it.
  package var defaultDataProtection: ProtectionClass?
  /// What the declarations imply.
  package var implications: [AppImplication]

  /// The class the app's container is made with: the entitlement's, else iOS's default.
  package var containerDefaultClass: ProtectionClass { defaultDataProtection ?? .containerDefault }

  /// Reads the app at `path`: an `.ipa` file or an `.app` directory. The path itself is resolved
  /// as given (a link to an app is followed, once); nothing inside the app is read through a link.
  package static func read(_ path: String) throws(ProtFSError) -> AppPackage {
    let fd: FileDescriptor
    switch Kernel.open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC) {
    case .success(let opened): fd = FileDescriptor(owning: opened)
    case .failure(let e):
      var error = ProtFSError.system("read the app", path: path, errno: e)
      error.remedy = AppPackageError.advice
      throw error
    }
    var status = stat()
    _ = try Kernel.fstat(fd.rawValue, &status).orThrow("read the app", path: path)
    switch status.st_mode & S_IFMT {
    case S_IFDIR:
      let package = DirectoryPackage(fd: fd, path: path)
      return try read(path, member: package.member)
    case S_IFREG:
      let package = try ZipPackage(fd: fd, path: path)
      return try read(path, member: package.member)
    default:
      throw AppPackageError.malformed(path, "it is neither an .ipa file nor an .app directory")
    }
  }

  /// Reads the app at `path` whose members `member` opens by name, of at most a size.
  private static func read(_ path: String, member: (String, Int) throws(ProtFSError) -> (any PackageMember)?)
    throws(ProtFSError) -> AppPackage
  {
    guard let plist = try member("Info.plist", infoPlistLimit) else {
      throw AppPackageError.missing(path, "Info.plist")
    }
    let infoPlist = try plist.readAll(limit: infoPlistLimit)
    let info = try dictionary(infoPlist, path: plist.path, what: "Info.plist")
    func string(_ key: String) throws(ProtFSError) -> String? {
      guard let value = info[key] else { return nil }
      guard let text = value as? String else {
        throw AppPackageError.malformed(plist.path, "its \(key) is not a string")
      }
      return text
    }
    func strings(_ key: String) throws(ProtFSError) -> [String] {
      guard let value = info[key] else { return [] }
      guard let list = value as? [String] else {
        throw AppPackageError.malformed(plist.path, "its \(key) is not an array of strings")
      }
      return list
    }
    guard let identifier = try string("CFBundleIdentifier") else {
      throw AppPackageError.malformed(plist.path, "it has no CFBundleIdentifier")
    }
    let bundleID: BundleID
    do {
      bundleID = try BundleID(identifier)
    } catch {
      throw AppPackageError.malformed(
        plist.path, "its CFBundleIdentifier '\(identifier)' is no bundle id: \(error.message)")
    }
    guard let executableName = try string("CFBundleExecutable") else {
      throw AppPackageError.malformed(plist.path, "it has no CFBundleExecutable")
    }
    guard !executableName.isEmpty, executableName != ".", executableName != "..", !executableName.contains("/")
    else {
      throw AppPackageError.malformed(plist.path, "its CFBundleExecutable '\(executableName)' is not a file name")
    }
    let modes = try strings("UIBackgroundModes")
    let identifiers = try strings("BGTaskSchedulerPermittedIdentifiers")
    guard let executable = try member(executableName, executableLimit) else {
      throw AppPackageError.missing(path, "executable '\(executableName)' (its CFBundleExecutable)")
    }
    let slices = try MachOExecutable.slices(of: executable)
    let signed = slices.filter { $0.signature != nil }
    let chosen = signed.first { $0.architecture == "arm64" } ?? signed.first
    let (entitlements, defaultDataProtection) = try readEntitlements(of: chosen, in: executable.path)
    var displayName = try string("CFBundleDisplayName")
    if displayName == nil { displayName = try string("CFBundleName") }
    return AppPackage(
      path: path, bundleID: bundleID, executableName: executableName, displayName: displayName,
      version: try string("CFBundleShortVersionString"), minimumOSVersion: try string("MinimumOSVersion"),
      backgroundModes: modes, permittedTaskIdentifiers: identifiers, infoPlist: infoPlist, slices: slices,
      signature: chosen?.signature, entitlements: entitlements, defaultDataProtection: defaultDataProtection,
      implications: AppImplication.of(
        backgroundModes: modes, permittedTaskIdentifiers: identifiers, defaultDataProtection: defaultDataProtection,
        signed: chosen != nil))
  }

  /// The entitlements of the code signature of `slice` (of the executable at `path`), and the
  /// default class they give; nil for an unsigned slice.
  private static func readEntitlements(of slice: MachOSlice?, in path: String) throws(ProtFSError)
    -> ([String: PropertyListValue]?, ProtectionClass?)
  {
    guard let blob = slice?.signature?.entitlements else { return (nil, nil) }
    let shown = "\(path) (the entitlements of its \(slice?.architecture ?? "") code signature)"
    let parsed = try dictionary(blob, path: shown, what: "entitlements")
    var values: [String: PropertyListValue] = [:]
    for (key, value) in parsed {
      guard let converted = PropertyListValue(value) else {
        throw AppPackageError.malformed(shown, "its entitlement \(key) holds a value no property list can")
      }
      values[key] = converted
    }
    // The one mapping of the entitlement to a class, as `init --entitlements` reads a file.
    return (values, try Entitlements(data: Data(blob), path: shown).defaultDataProtection)
  }

  /// The dictionary of the property list `bytes` read from `path` (`what`: its role, for messages),
  /// read within bounds (`BoundedPropertyList`).
  private static func dictionary(_ bytes: [UInt8], path: String, what: String) throws(ProtFSError) -> [String: Any] {
    switch BoundedPropertyList.parse(bytes, limits: BoundedPropertyList.Limits(bytes: infoPlistLimit)) {
    case .success(let value as [String: Any]):
      return value
    case .success:
      throw AppPackageError.malformed(path, "its \(what) does not hold a dictionary at its top level")
    case .failure(let refusal):
      throw AppPackageError.malformed(path, "its \(what) is not a property list protfs reads: \(refusal.reason)")
    }
  }
}
