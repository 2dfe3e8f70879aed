import ProtFS
import ProtFSAppBundle
import ProtFSLock

/// `protfs init BUNDLE-ID`: creates an app container.
package enum InitCommand {
  package static let command = Command(
    name: "init",
    abstract: "Create an app container on the device.",
    discussion: """
      Creates <device>/Containers/<bundle-id>/ with Documents, Library/Caches,
      Library/Application Support, Library/Preferences and tmp. The container's default class is
      complete-until-first-user-authentication unless --default-class or the
      com.apple.developer.default-data-protection entitlement says otherwise (from an entitlements
      file, or from an app's code signature with --from-app, which also gives the bundle id). The
      device directory is created too if needed. Running it again on an existing container changes
      nothing but a default class given explicitly. Prints the container's path.

      With --sealed, the device is sealed (docs/sealed.md): every file written into its containers
      from then on is encrypted at rest with a key of its own, wrapped by its class's key, and a
      lock evicts class keys instead of changing permission modes. A device is sealed when it holds
      no file yet (a new one, or one whose containers hold directories only), without a passcode;
      `protfs seal` seals a device that holds files. Sealing a sealed device changes nothing.

      With --json: one object with bundleID, path, created (false when it existed), className and
      classRawValue (its default class, keyed as ls and get-class key a class) and, when this run
      changed the default, previousClassName.
      """,
    arguments: [optionalBundleID],
    options: [defaultClass, entitlements, fromApp, sealed, CommonOptions.json],
    run: run
  )

  /// `<bundle-id>`, the app a container belongs to (also for init-cache).
  package static let bundleID = Argument(
    name: "bundle-id", help: "The app's bundle identifier, for example com.example.app.")
  /// `[<bundle-id>]`: init's, which `--from-app` may give instead.
  package static let optionalBundleID = Argument(
    name: "bundle-id", help: "The app's bundle identifier, for example com.example.app (with --from-app, the app's).",
    arity: .optional)
  /// `--from-app APP`.
  package static let fromApp = Option.value(
    "from-app", "app",
    help: "Take the bundle id and the default class from this app (.ipa or .app) and its code signature.")
  /// `--default-class CLASS`.
  package static let defaultClass = Option.value(
    "default-class", "class", help: "The container's default protection class.")
  /// `--entitlements FILE`.
  package static let entitlements = Option.value(
    "entitlements", "file", help: "Take the default class from this entitlements plist (XML or binary).")

  /// `--sealed`.
  package static let sealed = Option.flag(
    "sealed", help: "Seal the device: file contents encrypted at rest with per-file keys wrapped by class keys.")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let app = try invocation.value(Self.fromApp).map(AppPackage.read)
    let bundleID = try Self.appBundleID(invocation, Self.optionalBundleID, app: app)
    let defaultClass = try requestedDefaultClass(invocation, app: app)
    let device = invocation.device
    let wasInitialized = device.isInitialized
    let result = try device.createContainer(bundleID, defaultClass: defaultClass)
    let madeSealed = try invocation.flag(sealed) && invocation.lockController.sealEmptyDevice()
    noteDevice(invocation, made: !wasInitialized)
    if madeSealed {
      Console.err("Sealed the device '\(device.root)': its files are encrypted at rest with keys of their own.")
    }
    try report(result, bundleID: bundleID, invocation)
    return 0
  }

  /// The default class asked for: `--default-class`'s, else the entitlements' of `--entitlements`
  /// or of the app (`--from-app`); nil, with a note when the entitlements say nothing, for
  /// the container's default.
  static func requestedDefaultClass(_ invocation: Invocation, app: AppPackage?) throws -> ProtectionClass? {
    var defaultClass = try invocation.value(Self.defaultClass).map(invocation.protectionClass)
    if let app {
      if defaultClass != nil || invocation.value(Self.entitlements) != nil {
        throw invocation.usageError("Give one of --default-class, --entitlements and --from-app, not several.")
      }
      defaultClass = app.defaultDataProtection
      if defaultClass == nil {
        Console.err(
          "note: the entitlements of '\(app.path)' do not set \(Entitlements.defaultDataProtectionKey); using \(ProtectionClass.containerDefault.name)."
        )
      }
    }
    if let path = invocation.value(Self.entitlements) {
      if defaultClass != nil {
        throw invocation.usageError("Give either --default-class or --entitlements, not both.")
      }
      let entitlements = try Entitlements(contentsOf: path)
      defaultClass = entitlements.defaultDataProtection
      if defaultClass == nil {
        Console.err(
          "note: '\(path)' does not set \(Entitlements.defaultDataProtectionKey); using \(ProtectionClass.containerDefault.name)."
        )
      }
    }
    return defaultClass
  }

  /// Says what `init` did to `bundleID`'s container (`result`), and prints its path (or the JSON).
  static func report(_ result: ContainerCreation, bundleID: BundleID, _ invocation: Invocation) throws {
    let device = invocation.device
    let container = device.container(bundleID)
    if result.created {
      Console.err("Created container \(bundleID) (default class \(result.defaultClass.name)).")
      noteNearMiss(bundleID, on: device)
    } else if let previous = result.previousDefault {
      Console.err(
        "Container \(bundleID) exists; default class changed from \(previous.name) to \(result.defaultClass.name).")
    } else {
      Console.err("Container \(bundleID) already exists (default class \(result.defaultClass.name)).")
    }
    if invocation.flag(CommonOptions.json) {
      try Console.json(
        Outcome(
          bundleID: bundleID.rawValue, path: container.absolutePath, created: result.created,
          className: result.defaultClass.name, classRawValue: result.defaultClass.rawValue,
          previousClassName: result.previousDefault?.name))
    } else {
      Console.out(container.absolutePath)
    }
  }

  /// What `init --json` prints.
  struct Outcome: Encodable {
    /// The app.
    var bundleID: String
    /// The container's absolute path.
    var path: String
    /// Whether this run created it.
    var created: Bool
    /// The container's default class, protfs's name.
    var className: String
    /// The container's default class, its raw value.
    var classRawValue: String
    /// The default class before this run changed it.
    var previousClassName: String?
  }

  /// The bundle id of a command that takes it from `argument` or from `app` (`--from-app`): the
  /// one given, which must then be the app's, else the app's.
  static func appBundleID(_ invocation: Invocation, _ argument: Argument, app: AppPackage?) throws -> BundleID {
    let given = try invocation.argument(argument).map(invocation.bundleID)
    if let given, let app, given != app.bundleID {
      throw invocation.usageError(
        "The bundle id \(given) is not the app's: '\(app.path)' is \(app.bundleID); give the app's, or leave it out.")
    }
    guard let bundleID = given ?? app?.bundleID else {
      throw invocation.usageError("Give the app's bundle id, or --from-app APP to take it from the app.")
    }
    return bundleID
  }

  /// Says where the device is when this command made it at the default path (which no option or
  /// variable named), and warns when the app user could not reach it: `protfs exec` and
  /// `app launch` would fail there.
  static func noteDevice(_ invocation: Invocation, made: Bool) {
    let device = invocation.device
    let named =
      !(invocation.value(CommonOptions.device) ?? "").isEmpty
      || !(invocation.environment["PROTFS_DEVICE"] ?? "").isEmpty
    if made && !named {
      Console.err(
        "note: made the device '\(device.root)', the default; --device DIR or $PROTFS_DEVICE names another.")
    }
    if let unreachable = Confinement.unreachableDirectory(device) {
      Console.err("warning: \(invocation.describe(unreachable))")
    }
  }

  /// Points out, after `bundleID`'s container was created, another container of `device` whose
  /// bundle id it is likely a misspelling of: creating is what a mistyped id does here.
  static func noteNearMiss(_ bundleID: BundleID, on device: Device) {
    guard let near = device.nearestContainer(to: bundleID) else { return }
    Console.err("note: the device also has the container \(near); did you mean that app?")
  }
}
