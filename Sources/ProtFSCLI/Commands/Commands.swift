/// Every command of `protfs`, in the order `protfs --help` lists them.
package enum Commands {
  package static let root = Command(
    name: "protfs",
    abstract: "iOS Data Protection on Linux: protection classes, lock states and background downloads.",
    discussion: """
      protfs keeps a simulated iOS device in a directory: app containers whose files carry
      protection classes (extended attribute user.protfs.class), a lock state that is enforced on
      every process, background downloads that meet the lock as nsurlsessiond's do, and audits.
      """,
    subcommands: [
      InitCommand.command,
      SealCommand.command,
      InitCacheCommand.command,
      SetClassCommand.command,
      GetClassCommand.command,
      ListCommand.command,
      LockCommand.command,
      UnlockCommand.command,
      RebootCommand.command,
      EraseCommand.command,
      StatusCommand.command,
      DoctorCommand.command,
      WatchCommand.command,
      ExecCommand.command,
      EndGraceCommand.command,
      AppCommand.command,
      MountCommand.command,
      UnmountCommand.command,
      PasscodeCommand.command,
      DownloadCommand.command,
      UploadCommand.command,
      TasksCommand.command,
      SessionsCommand.command,
      CacheCommand.command,
      StoragePressureCommand.command,
      AuditCommand.command,
      InspectCommand.command,
      ImportBackupCommand.command,
      CompletionCommand.command,
    ]
  )
}
