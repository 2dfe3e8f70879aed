import ProtFSSystem

/// The model's failure codes: what a device, its classes and its lock state can refuse.
extension ProtFSError.Code {
  /// An attribute holds a value protfs does not understand.
  public static let corruptAttribute = Self("corruptAttribute")
  /// The path leaves the device, directly or through a symlink.
  public static let outsideDevice = Self("outsideDevice")
  /// The device directory has not been initialised.
  public static let notInitialized = Self("notInitialized")
  /// The data is protected and not available in the device's current state (EPERM on iOS).
  public static let protectedDataUnavailable = Self("protectedDataUnavailable")
}

/// The model's remedies: unlock, give a class, create a container or the device.
extension Remedy.Action {
  /// Unlock the device first.
  public static let unlock = Self("unlock")
  /// Give the item at argument `path` a valid protection class.
  public static let setClass = Self("setClass")
  /// Create the container of argument `bundleID`.
  public static let createContainer = Self("createContainer")
  /// Initialise the device at argument `root` by creating a first container.
  public static let initializeDevice = Self("initializeDevice")
}

extension Remedy {
  /// Unlock the device first.
  public static let unlock = Remedy(.unlock, advice: "unlock the device first")

  /// Give the item at `path` a valid protection class.
  public static func setClass(path: String) -> Remedy {
    Remedy(.setClass, ["path": .text(path)], advice: "give '\(path)' a valid protection class")
  }

  /// Create the container of `bundleID`.
  public static func createContainer(bundleID: String) -> Remedy {
    Remedy(.createContainer, ["bundleID": .text(bundleID)], advice: "create the container of \(bundleID) first")
  }

  /// Initialise the device at `root` by creating a first container.
  public static func initializeDevice(root: String) -> Remedy {
    Remedy(.initializeDevice, ["root": .text(root)], advice: "initialise the device by creating a first container")
  }
}
