extension DownloadSessionConfiguration {
  /// The store file's name in the device's `.protfs/` directory.
  public static let storeFileName = "downloads.sqlite"

  /// The configuration of session `identifier` of `container`'s app, with the device's paths: the
  /// store in `<device>/.protfs/downloads.sqlite`, temp files in the container's nsurlsessiond
  /// Downloads directory, finished files in the container's `Documents` unless a task says otherwise.
  public init(identifier: String, container: Container) {
    self.init(
      identifier: identifier, bundleID: container.bundleID.rawValue,
      storePath: container.device.stateDirectory + "/" + Self.storeFileName,
      temporaryDirectory: container.device.absolutePath(container.downloadsPath),
      destinationDirectory: container.absolutePath + "/Documents")
  }
}
