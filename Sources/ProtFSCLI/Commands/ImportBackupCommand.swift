import Foundation
import ProtFS
import ProtFSBackup
import ProtFSSystem

/// `protfs import-backup BACKUP-DIR [--bundle ID]… [--password-file FILE|-] [--metadata-only]
/// [--replace] [--json]`: a real iPhone's app containers, with every file's Data Protection class,
/// on the device.
package enum ImportBackupCommand {
  package static let command = Command(
    name: "import-backup",
    abstract: "Import an iOS backup's app containers, with every file's real protection class.",
    discussion: """
      Reads the backup folder (Manifest.db and the file store xx/FILE-ID, as Finder, iTunes and
      idevicebackup2 write them) and creates one container per app domain: AppDomain-ID,
      AppDomainGroup-ID and AppDomainPlugin-ID become Containers/ID. Other domains are counted
      and skipped. Each file and directory keeps its path, mode and modification time, belongs to
      the app user, and gets its own class from the backup's ProtectionClass (1 complete,
      2 complete-unless-open, 3 complete-until-first-user-authentication, 4 none; another number is
      reported with the file, never guessed). Symlinks stay symlinks to where the backup says.
      A file whose contents the backup lacks (every file with --metadata-only, for a fast audit)
      is a sparse file of its recorded size, and is listed. Where the manifest records a digest of
      a file's contents (SHA-1, or SHA-256), the contents are copied only when they have it; a file
      whose contents do not is made sparse too, and listed as mismatched. Paths that would leave
      the container are skipped and listed.

      The backup is read as anyone's to write: the folder is opened once and nothing in it is
      reached through a symbolic link; a stored file is copied only when it is a regular file of
      one link no larger than its recorded size (its holes kept), else made sparse and listed as
      refused, with why.

      An encrypted backup ("Encrypt local backup") is read with its password: from the first
      line of the file --password-file names (- reads standard input), or asked for on the
      terminal; never on the command line, where other users see it in ps (the passcode commands
      keep their --passcode for the scripts that give it, with a warning). Its keybag is
      unlocked, Manifest.db decrypted (into staging) and each file with its own key; a wrong
      password is one error, and nothing is written. Files whose contents cannot be decrypted are
      made sparse and listed.

      The containers are built under .protfs/staging/ and renamed into place once all are
      complete, having first met the device's lock state as a lock would have left them (into a
      locked device, class-A files are out of reach until the unlock); an existing container is
      refused unless --replace.

      On a sealed device (docs/sealed.md) every file is written sealed: its key record is made
      for its class before a byte is written, in staging, and its contents are encrypted with its
      own key (an encrypted backup's files are decrypted and encrypted again: iOS's AES-CBC file
      keys cannot serve protfs's AES-XTS blocks). A file without contents is its size of encrypted
      zeros. A file of a class whose key the device has evicted (class A while locked) stops
      everything with "Operation not permitted", naming the file: nothing is imported.

      With --json: an object with
      containers (each with bundleID, domain, files, directories, symlinks, classes,
      missingContents, refusedContents, mismatchedContents, undecryptableContents, unknownClasses,
      skipped and replaced), skippedDomains and unreadable.
      """,
    arguments: [backup],
    options: [bundle, passwordFile, metadataOnly, replace, CommonOptions.json],
    run: run)

  /// `<backup-dir>`.
  static let backup = Argument(name: "backup-dir", help: "The backup's folder (the one holding Manifest.db).")
  /// `--bundle ID`, repeatable.
  static let bundle = Option.value(
    "bundle", "id", help: "Import only this app's domains (repeat for more).", repeatable: true)
  /// `--password-file FILE|-`.
  static let passwordFile = Option.value(
    "password-file", "file", help: "Read an encrypted backup's password from FILE's first line (- for standard input).")
  /// `--metadata-only`.
  static let metadataOnly = Option.flag(
    "metadata-only", help: "Make every file a sparse file of its size, without copying contents.")
  /// `--replace`.
  static let replace = Option.flag("replace", help: "Replace containers of the same ids that exist.")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let path = invocation.required(backup)
    let device = invocation.device
    // Opened once: everything below is read beneath this descriptor.
    let folder = try BackupFolder(path: path)
    let password = try Self.password(invocation, folder: folder)
    let manifest = try BackupManifest(folder: folder, password: password.map { Array($0.utf8) })
    if manifest.keys == nil, invocation.value(passwordFile) != nil {
      Console.err("warning: the backup '\(path)' is not encrypted; --password-file is not needed.")
    }
    let report = try BackupImport(device: device, manifest: manifest, admission: invocation.lockController).run(
      only: Set(invocation.values(bundle)), metadataOnly: invocation.flag(metadataOnly),
      replace: invocation.flag(replace))
    if invocation.flag(CommonOptions.json) {
      try Console.json(report)
      return 0
    }
    for container in report.containers { printImported(container) }
    if !report.skippedDomains.isEmpty {
      let total = report.skippedDomains.values.reduce(0, +)
      let domains = Counted.text(report.skippedDomains.count, "domain")
      Console.out(
        "Skipped \(Counted.text(total, "entry", plural: "entries")) of \(domains) that \(report.skippedDomains.count == 1 ? "is not an app container" : "are not app containers")."
      )
    }
    for problem in report.unreadable { Console.err("warning: unreadable manifest row: \(problem)") }
    if report.containers.isEmpty { Console.out("The backup holds no app container to import.") }
    return 0
  }

  /// The backup's password: from `--password-file`, else asked on a terminal when the backup is
  /// encrypted; nil otherwise.
  static func password(_ invocation: Invocation, folder: BackupFolder) throws -> String? {
    if let file = invocation.value(passwordFile) {
      return try PasscodeFile.read(file, option: passwordFile.long, what: "password")
    } else if Kernel.isatty(STDIN_FILENO) == 1, try BackupManifest.isEncrypted(folder) {
      return Terminal.readSecret("Password of the encrypted backup: ")
    }
    return nil
  }

  /// What was imported into `container`, and what of it is sparse, unclassed or skipped.
  static func printImported(_ container: BackupImport.ContainerReport) {
    let classes = container.classes.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
      .joined(separator: ", ")
    Console.out(
      "Imported \(container.bundleID)\(container.replaced ? " (replaced)" : ""): "
        + "\(Counted.text(container.files, "file")), "
        + "\(Counted.text(container.directories, "directory", plural: "directories")), "
        + "\(Counted.text(container.symlinks, "symlink"))"
        + (classes.isEmpty ? "" : " (\(classes))"))
    for missing in container.missingContents { Console.out("  no contents in the backup (sparse): \(missing)") }
    for refused in container.refusedContents { Console.out("  stored contents refused (sparse): \(refused)") }
    for mismatched in container.mismatchedContents {
      Console.out("  contents do not match the manifest's digest (sparse): \(mismatched)")
    }
    for undecryptable in container.undecryptableContents {
      Console.out("  contents cannot be decrypted (sparse): \(undecryptable)")
    }
    for unknown in container.unknownClasses { Console.out("  unknown protection class, none set: \(unknown)") }
    for skipped in container.skipped { Console.out("  skipped: \(skipped)") }
  }
}
